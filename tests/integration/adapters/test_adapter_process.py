"""run_process against real children: long lines, floods, split characters, process groups."""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
import sys
import textwrap
from pathlib import Path

import pytest

from adapters import output_buffers
from adapters.output_buffers import SPILL_BYTES, LogHead
from adapters.process import minimal_env, run_process
from tests.support.agent_kit import Sink, alive, eventually


def py(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


async def run(
    argv: list[str],
    tmp_path: Path,
    *,
    sink: Sink | None = None,
    abort: asyncio.Event | None = None,
    timeout_s: float = 60,
    **kw,
):
    return await run_process(
        argv,
        cwd=tmp_path,
        env=minimal_env(),
        timeout_s=timeout_s,
        abort=abort or asyncio.Event(),
        on_output=sink,
        grace_s=0.5,
        **kw,
    )


# A leader that starts a child in its own group; the child ignores SIGTERM, so only the
# SIGKILL that follows the grace period can end it. Both print their pids.
SPAWN_STUBBORN_CHILD = """
    import signal, subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c",
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"])
    print(f"child={child.pid}", flush=True)
"""


def child_pid(sink: Sink) -> int | None:
    for line in sink.text().splitlines():
        if line.startswith("child="):
            return int(line.removeprefix("child="))
    return None


async def test_a_line_longer_than_64_kib_arrives_intact(tmp_path):
    sink = Sink()
    done = await run(
        py("import sys; sys.stdout.write('a' * 300_000 + '\\nend\\n')"), tmp_path, sink=sink
    )
    assert done.exit_code == 0
    assert done.stdout == b"a" * 300_000 + b"\nend\n"
    assert sink.text() == "a" * 300_000 + "\nend\n"


async def test_floods_on_stdout_and_stderr_at_once_do_not_deadlock(tmp_path):
    # Blocking writes alternate between the pipes: a reader that drained one pipe at a time
    # would leave the child stuck on the other one, full.
    code = """
        import sys
        block = "x" * 65_536
        for _ in range(32):
            sys.stdout.write(block); sys.stdout.flush()
            sys.stderr.write(block); sys.stderr.flush()
    """
    done = await run(py(code), tmp_path)
    assert not done.timed_out and done.exit_code == 0
    assert len(done.stdout) == len(done.stderr) == 32 * 65_536
    assert len(done.log) == 64 * 65_536


async def test_a_character_split_across_reads_survives(tmp_path):
    code = """
        import sys, time
        out = sys.stdout.buffer
        out.write(b"a" * 65_535 + "€".encode()); out.flush()   # the read boundary cuts "€"
        time.sleep(0.2)
        out.write(b"\\xe2\\x82"); out.flush()                    # half a "€" ...
        time.sleep(0.2)
        out.write(b"\\xac\\n"); out.flush()                      # ... and its other half
    """
    sink = Sink()
    done = await run(py(code), tmp_path, sink=sink)
    assert done.exit_code == 0
    assert sink.text() == "a" * 65_535 + "€€\n"
    assert "\ufffd" not in sink.text()


async def test_invalid_utf8_is_replaced_not_fatal(tmp_path):
    sink = Sink()
    done = await run(
        py("import sys; sys.stdout.buffer.write(b'ok \\xff\\xfe bytes\\n')"), tmp_path, sink=sink
    )
    assert done.exit_code == 0
    assert sink.text() == "ok \ufffd\ufffd bytes\n"


async def test_stdin_is_empty(tmp_path):
    done = await run(py("import sys; print(repr(sys.stdin.read()))"), tmp_path)
    assert done.stdout == b"''\n"


async def test_a_timeout_kills_the_whole_process_group(tmp_path):
    sink = Sink()
    code = SPAWN_STUBBORN_CHILD + "    time.sleep(300)\n"
    done = await run(py(code), tmp_path, sink=sink, timeout_s=1)
    assert done.timed_out and not done.aborted
    assert done.exit_code is None
    pid = child_pid(sink)
    assert pid is not None
    await eventually(lambda: not alive(pid))


async def test_abort_kills_the_whole_process_group(tmp_path):
    sink, abort = Sink(), asyncio.Event()
    code = SPAWN_STUBBORN_CHILD + "    time.sleep(300)\n"
    running = asyncio.create_task(run(py(code), tmp_path, sink=sink, abort=abort, timeout_s=600))
    await eventually(lambda: child_pid(sink) is not None)
    abort.set()
    done = await running
    assert done.aborted and not done.timed_out and done.exit_code is None
    await eventually(lambda: not alive(child_pid(sink)))


async def test_an_abort_set_before_the_start_starts_nothing(tmp_path):
    abort = asyncio.Event()
    abort.set()
    done = await run(py("open('started', 'w')"), tmp_path, abort=abort)
    assert done.aborted
    assert not (tmp_path / "started").exists()


async def test_children_left_behind_by_a_normal_exit_are_killed(tmp_path):
    sink = Sink()
    done = await run(py(SPAWN_STUBBORN_CHILD), tmp_path, sink=sink)
    assert done.exit_code == 0 and not done.timed_out
    await eventually(lambda: not alive(child_pid(sink)))


async def test_cancelling_the_caller_kills_the_process_group(tmp_path):
    sink = Sink()
    code = SPAWN_STUBBORN_CHILD + "    time.sleep(300)\n"
    running = asyncio.create_task(run(py(code), tmp_path, sink=sink, timeout_s=600))
    await eventually(lambda: child_pid(sink) is not None)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    await eventually(lambda: not alive(child_pid(sink)))


async def test_a_daemon_that_left_the_group_does_not_hang_the_run(tmp_path):
    # It holds the pipes open from its own session, out of reach of the group kill;
    # run_process stops waiting for the pipes after the grace period.
    code = """
        import os, subprocess, sys
        daemon = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"],
                                  start_new_session=True)
        print(f"child={daemon.pid}", flush=True)
    """
    sink = Sink()
    try:
        done = await run(py(code), tmp_path, sink=sink, timeout_s=600)
        assert done.exit_code == 0 and not done.timed_out
    finally:
        if (pid := child_pid(sink)) is not None:
            os.kill(pid, signal.SIGKILL)


async def test_a_killed_child_reports_the_signal(tmp_path):
    done = await run(py("import os, signal; os.kill(os.getpid(), signal.SIGKILL)"), tmp_path)
    assert done.exit_code is None and done.signal == signal.SIGKILL
    assert not done.timed_out and not done.aborted


async def test_output_past_the_limit_keeps_the_log_head_and_the_result_tail(tmp_path):
    code = "import sys; sys.stdout.write('START' + 'x' * 100_000 + 'END\\n')"
    done = await run(py(code), tmp_path, log_limit=1000)
    # stdout, read for the run's result, keeps how it began and how it ended
    assert done.stdout.startswith(b"START") and done.stdout.endswith(b"END\n")
    assert b"bytes of output dropped here]" in done.stdout and len(done.stdout) < 1100
    # the log keeps the first bytes as they came, then says where it stopped
    marker = (
        b"\n[t25: output truncated after 1000 bytes; the log artifact keeps the first 1000 bytes]\n"
    )
    assert done.log == b"START" + b"x" * 995 + marker
    assert done.tail.endswith(b"x" * 1000 + b"END\n")  # and the last bytes, wherever it was cut


async def test_stdout_for_the_result_is_bounded_apart_from_the_log(tmp_path):
    code = "import sys; sys.stdout.write('START' + 'x' * 100_000 + 'END\\n')"
    done = await run(py(code), tmp_path, log_limit=200_000, parse_limit=1000)
    assert done.log == b"START" + b"x" * 100_000 + b"END\n"
    assert done.stdout.startswith(b"START") and done.stdout.endswith(b"END\n")
    assert len(done.stdout) < 1100


async def test_aider_reads_every_token_report_of_a_long_run(tmp_path):
    # aider reports tokens after every exchange and its parse sums them: it reads more of
    # stdout than a CLI whose result is its last line
    from adapters.aider import AiderSpec
    from adapters.process import PARSE_LIMIT

    code = (
        "import sys\n"
        "for _ in range(3):\n"
        "    sys.stdout.write(('chatter ' * 15 + '\\n') * 30_000)\n"  # 3.6 MB
        "    print('Tokens: 1,000 sent, 10 received. Cost: $0.01 message, $0.01 session.')\n"
    )
    whole = await run(py(code), tmp_path, parse_limit=AiderSpec.parse_limit)
    assert AiderSpec().parse(whole.stdout.decode()).usage.input_tokens == 3000
    short = await run(py(code), tmp_path, parse_limit=PARSE_LIMIT)
    assert AiderSpec().parse(short.stdout.decode()).usage.input_tokens < 3000


async def test_the_log_is_byte_exact_up_to_its_limit_across_both_streams(tmp_path):
    # bytes that are not UTF-8, split characters, both streams: kept exactly as they came
    code = (
        "import os, sys\n"
        "for i in range(200):\n"
        "    os.write(1, bytes([i % 256]) * 700 + 'é'.encode() + b'\\xff\\n')\n"
    )
    done = await run(py(code), tmp_path, log_limit=50_000)
    expected = b"".join(bytes([i % 256]) * 700 + "é".encode() + b"\xff\n" for i in range(200))
    assert done.log.startswith(expected[:50_000])
    assert done.log[50_000:] == (
        b"\n[t25: output truncated after 50000 bytes; the log artifact keeps the first 50000 bytes]\n"
    )
    whole = await run(py(code), tmp_path, log_limit=len(expected))
    assert whole.log == expected  # exactly at the limit: nothing cut, no marker


async def test_a_big_log_waits_on_disk_and_comes_back_byte_exact(tmp_path):
    # 5 MiB of output, 3 MiB kept: never more than SPILL_BYTES of it held while it runs
    code = "import os\nfor i in range(80):\n    os.write(1, bytes([i]) * 65536)\n"
    done = await run(py(code), tmp_path, log_limit=3 * 2**20)
    expected = b"".join(bytes([i]) * 65536 for i in range(80))
    marker = truncation(3 * 2**20)
    assert done.log == expected[: 3 * 2**20] + marker


async def test_an_agents_log_is_spooled_to_its_file_byte_exact_with_its_size_and_hash(tmp_path):
    # 5 MiB of output, 3 MiB kept: written to the named file as it comes, hashed as written
    code = "import os\nfor i in range(80):\n    os.write(1, bytes([i]) * 65536)\n"
    spool = tmp_path / "logs" / "R-1.log"
    spool.parent.mkdir()
    done = await run(py(code), tmp_path, log_limit=3 * 2**20, log_to=spool)
    expected = b"".join(bytes([i]) * 65536 for i in range(80))[: 3 * 2**20] + truncation(3 * 2**20)
    assert done.log == b"" and done.log_file is not None
    assert done.log_file.path == spool and spool.read_bytes() == expected
    assert done.log_file.size == len(expected)
    assert done.log_file.sha256 == hashlib.sha256(expected).hexdigest()
    quiet = await run(py("pass"), tmp_path, log_to=tmp_path / "logs" / "R-2.log")
    assert quiet.log_file is not None and quiet.log_file.size == 0  # a file all the same
    assert quiet.log_file.path.read_bytes() == b""


async def test_a_cancelled_run_removes_the_file_its_log_was_spooled_to(tmp_path):
    spool = tmp_path / "R-1.log"
    running = asyncio.create_task(
        run(
            py("import os, time\nos.write(1, b'x' * 3_000_000)\ntime.sleep(60)"),
            tmp_path,
            log_to=spool,
        )
    )
    await eventually(lambda: spool.exists())
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert not spool.exists()


async def test_a_log_fed_past_the_spill_holds_little_in_memory():
    log = LogHead(4 * 2**20)
    for i in range(100):
        await log.add(bytes([i]) * 65536)
        assert len(log.buffer) < SPILL_BYTES
    assert log.file is not None
    value = await log.value()
    log.close()
    assert value == b"".join(bytes([i]) * 65536 for i in range(100))[: 4 * 2**20] + truncation(
        4 * 2**20
    )


async def test_without_room_on_disk_the_log_stays_in_memory_and_whole(monkeypatch):
    calls = []

    def no_room():
        calls.append(1)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(output_buffers, "_unnamed_file", no_room)
    log = LogHead(3 * 2**20)
    for i in range(60):
        await log.add(bytes([i]) * 65536)
    assert calls == [1]  # tried once, then kept in memory
    assert await log.value() == b"".join(bytes([i]) * 65536 for i in range(60))[: 3 * 2**20] + (
        truncation(3 * 2**20)
    )


def truncation(limit: int) -> bytes:
    return (
        f"\n[t25: output truncated after {limit} bytes; the log artifact keeps the first "
        f"{limit} bytes]\n"
    ).encode()


async def test_a_missing_binary_is_a_result_not_an_exception(tmp_path):
    done = await run(["t25-no-such-program", "--flag"], tmp_path)
    assert done.spawn_error == "command not found: t25-no-such-program"
    assert done.exit_code is None


async def test_a_file_that_is_not_executable_is_a_result(tmp_path):
    script = tmp_path / "script.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o644)
    done = await run([str(script)], tmp_path)
    assert done.spawn_error == f"permission denied: {script}"


async def test_a_missing_working_directory_is_a_result(tmp_path):
    done = await run_process(
        [sys.executable, "-c", "pass"],
        cwd=tmp_path / "gone",
        env=minimal_env(),
        timeout_s=10,
        abort=asyncio.Event(),
    )
    assert done.spawn_error == f"working directory not found: {tmp_path / 'gone'}"


async def test_a_failing_sink_is_raised_once_the_child_has_ended(tmp_path):
    async def broken(stream: str, text: str) -> None:
        raise RuntimeError("sink broke")

    code = "import sys; sys.stdout.write('x' * 1_000_000)"
    with pytest.raises(RuntimeError, match="sink broke"):
        await run_process(
            py(code),
            cwd=tmp_path,
            env=minimal_env(),
            timeout_s=60,
            abort=asyncio.Event(),
            on_output=broken,
        )


def test_the_minimal_environment_holds_no_secrets(monkeypatch):
    monkeypatch.setenv("FACTORY_WORKER_CREDENTIAL", "worker-secret")
    monkeypatch.setenv("T25_DATABASE_URL", "postgresql://u:pw@db/t25")
    monkeypatch.setenv("HOME", "/home/operator")
    env = minimal_env({"EXTRA": "1"})
    assert "FACTORY_WORKER_CREDENTIAL" not in env and "T25_DATABASE_URL" not in env
    assert env["HOME"] == "/home/operator" and env["TERM"] == "dumb" and env["EXTRA"] == "1"


def test_the_minimal_environment_holds_no_operator_token_either(monkeypatch):
    monkeypatch.setenv("T25_OPERATOR_TOKEN", "op-token-never-passed")
    assert "T25_OPERATOR_TOKEN" not in minimal_env()


async def test_a_held_secret_a_child_prints_is_redacted_before_it_is_streamed_or_kept(
    monkeypatch, tmp_path
):
    secret = "wc-streamed-3e9f1a7c55"
    # In-process, nothing was held: T25's secrets are read from the environment (held_secrets).
    monkeypatch.setenv("FACTORY_WORKER_CREDENTIAL", secret)
    code = f"""
        import sys, time
        secret = {secret!r}
        for stream in (sys.stdout, sys.stderr):
            for ch in secret:  # one byte per write: T25 reads it in many chunks
                stream.write(ch)
                stream.flush()
                time.sleep(0.002)
            stream.write(" done\\n")
            stream.flush()
        """
    sink = Sink()
    done = await run(py(code), tmp_path, sink=sink)
    mark = "[t25: redacted FACTORY_WORKER_CREDENTIAL] done\n"
    assert sink.text("stdout") == mark and sink.text("stderr") == mark
    assert done.stdout == done.stderr == mark.encode()
    assert secret.encode() not in done.log  # both streams, interleaved as they arrived
    assert done.log.count(b"[t25: redacted FACTORY_WORKER_CREDENTIAL]") == 2


@pytest.mark.parametrize(
    ("code", "timeout_s", "searched"),
    [("pass", 60, False), ("import time; time.sleep(300)", 1, True)],
    ids=["ended-by-itself", "stopped-by-t25"],
)
async def test_a_namespaced_run_is_searched_for_leftovers_only_when_t25_stopped_it(
    tmp_path, monkeypatch, code, timeout_s, searched
):
    """In a PID namespace that ends with the run's first process (bubblewrap's), a run that
    ended by itself left nothing; one T25 stopped may have (its namespace's first process
    killed before it could end the rest), and the run's tag is looked for."""
    from adapters import containment

    looked: list[str] = []
    monkeypatch.setattr(containment, "kill_tagged", lambda tag: looked.append(tag) or [])
    done = await run(py(code), tmp_path, timeout_s=timeout_s, tag="1.R-1", namespaced=True)
    assert done.timed_out is searched
    assert looked == (["1.R-1"] if searched else [])
    unnamespaced = await run(py("pass"), tmp_path, tag="1.R-2")
    assert unnamespaced.exit_code == 0 and looked[-1] == "1.R-2"
