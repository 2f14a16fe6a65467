"""Agent CLI adapters: the shared process machinery and one small spec per CLI.

    adapters.process   run_process, minimal_env: supervising one child process
    adapters.base      CliAdapterSpec, CliAdapter: the generic AgentAdapter
    adapters.parsing   helpers specs share to read CLI output
    adapters.entries   the lines of a transcript, and EventShapes: how a CLI's events read
    adapters.transcript  a run's output as a person reads it, through every registered CLI
    adapters.login     check_login: a CLI's login, by the probe its spec declares
    adapters.homes     a run's private HOME and its checkout view's scratch folder
    adapters.checks    run_check: the QA checks T25 runs itself
    adapters.figures   a check's test figures: pytest's summary line, JUnit XML
    adapters.sandbox   sandbox_for: none, bwrap, docker
    adapters.<cli>     all T25 knows of one CLI: its spec, how its output, usage and
                       login status read, its events in a transcript, the project files
                       it reads; no CLI's module imports another's (pyproject.toml)
    adapters.registry  the only list of the CLIs: BUILTIN_NAMES, builtin_specs(), builtin_adapters()

Deliberately empty of imports: `t25-scripted-agent` lives in this package and must start fast.
"""
