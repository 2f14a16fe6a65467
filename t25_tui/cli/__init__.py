"""One module per group of `t25` commands; each is imported only when its command runs."""
