"""Agent CLI adapters: the shared process machinery and one small spec per CLI.

    adapters.process   run_process, minimal_env: supervising one child process
    adapters.base      CliAdapterSpec, CliAdapter: the generic AgentAdapter
    adapters.parsing   helpers specs share to read CLI output
    adapters.checks    run_check: the QA checks T25 runs itself
    adapters.figures   a check's test figures: pytest's summary line, JUnit XML
    adapters.sandbox   sandbox_for: none, bwrap, docker
    adapters.claude, .codex, .gemini, .opencode, .aider   one small spec per real CLI
    adapters.scripted  the spec for t25-scripted-agent (adapters.scripted_agent)
    adapters.registry  builtin_adapters()

Deliberately empty of imports: `t25-scripted-agent` lives in this package and must start fast.
"""
