"""The worker's audit hook names what the candidate tried, and only the candidate: code that
inductor or Triton generated for the reference lives in the job directory too (measured on the
H200: a reference compiled from a kept cache read the keeping job's paths, and every verdict
came out `flagged: sandbox`)."""
import json
import subprocess
import sys
import textwrap

from workbench.gpu import sandbox

SCRIPT = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from workbench.gpu import observe
    job = Path(sys.argv[1])
    observe.install(read=[sys.prefix], write=[str(job)], origin=str(job),
                    generated=[str(job / "tmp" / "inductor")])
    for where in sys.argv[2:]:
        code = "def go(p):\\n    try:\\n        open(p).close()\\n    except OSError:\\n        pass\\n"
        ns = {}
        exec(compile(code, str(job / where), "exec"), ns)
        ns["go"]("/etc/hostname")
    print(json.dumps(observe.annotate({"status": "correct"})))
""")


def _verdict(tmp_path, *files: str) -> dict:
    job = tmp_path / "job"
    (job / "tmp" / "inductor").mkdir(parents=True)
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(job), *files], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    return json.loads(out.splitlines()[-1])


def test_the_candidates_own_read_is_named_and_flags(tmp_path):
    v = _verdict(tmp_path, "candidate/candidate.py")
    assert v["status"] == "flagged"
    assert "read /etc/hostname" in v["flags"][0]["reason"]


def test_reference_code_generated_in_the_job_directory_is_not_the_candidate(tmp_path):
    v = _verdict(tmp_path, "tmp/inductor/pt/abc.py")
    assert v == {"status": "correct"}


def test_harness_code_outside_the_job_directory_is_not_the_candidate(tmp_path):
    code = ("import json,sys; from workbench.gpu import observe; "
            "observe.install(read=[sys.prefix], write=[sys.argv[1]], origin=sys.argv[1]); "
            "open('/etc/hostname').close(); print(json.dumps(observe.annotate({'status': 'correct'})))")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    assert json.loads(out) == {"status": "correct"}


def test_the_worker_imports_the_harness_from_outside_its_job_directory(tmp_path, monkeypatch):
    # The worker imports workbench from its PYTHONPATH; from the job directory, the harness's
    # own reads (the kept reference cache's paths) flagged every verdict on the H200.
    monkeypatch.setattr(sandbox, "_prepare", lambda cache_dir, gpu: None)
    code = ("import json,sys,os; from workbench.gpu import observe; "
            "observe.install(read=[sys.prefix], write=[sys.argv[1]], origin=sys.argv[1]); "
            # a read by harness code, as the module file it was imported from names it
            "exec(compile(\"open('/etc/hostname').close()\", observe.__file__, 'exec')); "
            "print(json.dumps([observe.__file__, observe.annotate({'status': 'correct'})]))")
    for _ in range(2):  # the second launch reuses the link
        with sandbox.worker_launch(tmp_path / "cache", {}, None) as launch:
            out = subprocess.run([sys.executable, "-c", code, str(launch.job_dir)],
                                 env=launch.env, cwd=launch.cwd, capture_output=True, text=True,
                                 timeout=60, check=True).stdout
            where, v = json.loads(out)
            assert not where.startswith(str(launch.job_dir)) and v == {"status": "correct"}


def test_events_it_ignores_cost_no_walk_of_the_stack(tmp_path):
    # The hook runs for every audit event until the worker exits, timed calls included. Walking
    # frames raises an event per frame: a hook that walked the stack for every event multiplied
    # them (two million during `import torch`, half of that import's time on the dev VM).
    code = textwrap.dedent("""
        import sys
        from workbench.gpu import observe
        seen = []
        observe.install(read=[sys.prefix], write=[sys.argv[1]], origin=sys.argv[1])
        sys.addaudithook(lambda event, args: seen.append(event))
        for _ in range(200):
            compile("x = 1", "<probe>", "exec")
        print(sum(e == "object.__getattr__" for e in seen), seen.count("compile"))
    """)
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                         text=True, timeout=60, check=True).stdout.split()
    frame_events, compiles = map(int, out)
    assert compiles == 200 and frame_events == 0
