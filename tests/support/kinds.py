"""The kinds of test, each a folder of tests/: tests/conftest.py marks each test with its
folder's kind, and `slow` for SLOW_KINDS; tests/unit/test_suite_imports.py keeps a program-
starting fixture out of the quick kinds."""

KINDS = ("unit", "contract", "integration", "e2e")
SLOW_KINDS = frozenset({"integration", "e2e"})
# Fixtures that start whole programs: a test that uses one is integration or e2e
# (tests/unit/test_suite_imports.py).
SLOW_FIXTURES = frozenset(
    {
        "t25",  # the real binary
        "shop",  # the pipeline's sample project: the scripted agent runs in it
        "pg_cluster",  # a throwaway Postgres cluster, stopped and started for real
        "fake",  # the fake model server, for the real agent CLIs
    }
)
