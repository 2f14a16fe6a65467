"""Files shipped with the core package: the commented t25.yaml.example."""
