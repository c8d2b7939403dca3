"""Problem files are code too: loaded in a child process with a time limit, so an endless loop,
an exit or a crash at import gives one line naming the file and a non-zero exit, for
`problems`, `eval` and `run`; and a file's prints never mix into the command's output."""
from __future__ import annotations

import json
import time

import pytest
from click.testing import CliRunner

from test_search_engine import PROBLEM
from workbench import problem_loader
from workbench.cli import main
from workbench.gpu import confine
from workbench.problems import ProblemError, load_problem

HOSTILE = {
    "loop": ("while True:\n    pass\n", "still loading after 3 s (an endless loop at import?)"),
    "exit0": ("import sys\nsys.exit(0)\n", "calls sys.exit(0) at import"),
    "os_exit": ("import os\nos._exit(0)\n", "the loader exited (code 0) while importing it"),
    "segfault": ("import ctypes\nctypes.string_at(0)\n", "crashed the loader (SIGSEGV)"),
}


@pytest.fixture
def files(tmp_path, monkeypatch):
    monkeypatch.setenv(problem_loader.TIMEOUT_ENV, "3")
    paths = {}
    for name, (head, _) in HOSTILE.items():
        paths[name] = tmp_path / f"{name}.py"
        paths[name].write_text(head + PROBLEM)
    paths["chatty"] = tmp_path / "chatty.py"
    paths["chatty"].write_text("print('hello from the problem file')\n" + PROBLEM)
    return paths


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_problem_files_fail_in_one_line(files, name):
    load_problem(files["chatty"])     # the loader is up: the limit is the file's alone
    t0 = time.monotonic()
    with pytest.raises(ProblemError) as e:
        load_problem(files[name])
    message = str(e.value)
    assert message.startswith(str(files[name])) and HOSTILE[name][1] in message
    assert "\n" not in message and time.monotonic() - t0 < 10
    assert load_problem(files["chatty"]).name == "chatty"   # and the next file loads


@pytest.mark.parametrize("isolated", [True, False])
def test_a_file_that_kills_the_loader_is_one_line_and_the_next_load_works(files, tmp_path,
                                                                         monkeypatch, isolated):
    if isolated and not problem_loader.isolation():
        pytest.skip("no namespaces for an unprivileged process on this box")
    if not isolated:
        monkeypatch.setattr(problem_loader, "isolation", lambda: [])
        problem_loader._server._stop()
    killer = tmp_path / "killer.py"
    killer.write_text("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n" + PROBLEM)
    try:
        if confine.landlock_abi() >= 6:   # Landlock refuses the signal itself
            with pytest.raises(ProblemError, match=r"killer.py: .*PermissionError"):
                load_problem(killer)
        elif isolated:   # the loader is its PID namespace's init: unkillable from inside
            assert load_problem(killer).name == "killer"
        else:
            with pytest.raises(ProblemError, match="the problem loader died while loading it"):
                load_problem(killer)
        assert load_problem(files["chatty"], smoke=False).output_shapes == [(1024, 1024)]
    finally:
        if not isolated:
            problem_loader._server._stop()   # later tests get an isolated loader again


@pytest.mark.skipif(not confine.landlock_abi(), reason="no Landlock on this kernel")
def test_a_problem_file_writes_nothing_and_reads_only_its_own_folder(tmp_path):
    """A problem file is code from the internet (KernelBench is fetched): loading one may not
    write anywhere nor read outside the system, Python and its own folder."""
    secret = tmp_path / "elsewhere" / "kernels.db"
    secret.parent.mkdir()
    secret.write_text("the store")
    folder = tmp_path / "problems"
    folder.mkdir()
    (folder / "data.txt").write_text("its own data")
    writer = folder / "writer.py"
    writer.write_text(f"open({str(tmp_path / 'leak')!r}, 'w').write('x')\n" + PROBLEM)
    with pytest.raises(ProblemError, match=r"writer.py: .*PermissionError.*its own folder"):
        load_problem(writer)
    assert not (tmp_path / "leak").exists()
    reader = folder / "reader.py"
    reader.write_text(f"open({str(secret)!r}).read()\n" + PROBLEM)
    with pytest.raises(ProblemError, match=r"reader.py: .*PermissionError"):
        load_problem(reader)
    own = folder / "own.py"
    own.write_text("import pathlib\nDATA = (pathlib.Path(__file__).parent / 'data.txt')"
                   ".read_text()\n" + PROBLEM)
    assert load_problem(own).name == "own"


def test_commands_exit_non_zero_with_one_line(files, tmp_path):
    runner = CliRunner()
    candidate = tmp_path / "candidate.py"
    candidate.write_text("class ModelNew:\n    pass\n")
    for name in ("exit0", "loop"):
        path = str(files[name])
        for args in (["problems", path], ["eval", path, str(candidate), "--no-gpu",
                                          "--db", str(tmp_path / "k.db")],
                     ["run", path, "--provider", "openai-compatible", "--model", "m",
                      "--base-url", "http://127.0.0.1:9/v1", "--db", str(tmp_path / "k.db")]):
            result = runner.invoke(main, args)
            assert result.exit_code == 2, (args, result.output)
            errors = [line for line in result.output.splitlines() if line.startswith("error:")]
            assert len(errors) == 1 and path in errors[0] and HOSTILE[name][1] in errors[0]
    assert not (tmp_path / "k.db").exists()


def test_prints_of_a_problem_file_stay_out_of_json_output(files):
    result = CliRunner().invoke(main, ["problems", "--json", str(files["chatty"])])
    assert result.exit_code == 0
    assert json.loads(result.output)[0]["name"] == "chatty"


def test_a_problem_file_cannot_see_the_caller_or_the_network(tmp_path):
    if not problem_loader.isolation():
        pytest.skip("no user/network/PID namespaces for an unprivileged process on this box")
    import os
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import os, socket\n"
        f"SEEN = os.path.exists('/proc/{os.getpid()}/environ')\n"
        "try:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=2).close()\n"
        "    NET = True\n"
        "except OSError:\n"
        "    NET = False\n"
        "raise RuntimeError(f'seen={SEEN} net={NET}')\n" + PROBLEM)
    with pytest.raises(ProblemError, match="seen=False net=False"):
        load_problem(probe)
    listener.close()
