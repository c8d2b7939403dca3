"""`kernel-workbench run`: the search loop in the terminal, with progress lines and a final table.

Heavy modules (torch, the SDKs, the verifier pool) load inside the command, so `--help` is fast.
"""
from __future__ import annotations

import os
import signal
import sys
import threading

import click

from workbench.cli_options import check_sandbox, db_option, fail, open_store, sandbox_option
from workbench.run_output import Printer, print_table, terminal_review
from workbench.llm.factory import PROVIDERS
from workbench.store_errors import MAX_ID

_SEARCH_FLAGS = ("rounds", "ideas", "impls", "top_k", "repairs", "refines", "review", "budget_usd",
                 "budget_tokens", "stop_at_roofline", "combine", "judge_ideas")
_MINUTE_FLAGS = {"budget_minutes": "budget_wall_s", "budget_gpu_minutes": "budget_gpu_s"}
_PROVIDER_FLAGS = ("reasoning_effort", "thinking_budget", "timeout_s", "retries", "concurrency")


def _gpu_list(values: tuple[str, ...]) -> list[int] | None:
    gpus = [int(v) for value in values for v in value.split(",") if v.strip()]
    return gpus or None


def _seed_kernels(store, ids: tuple[int, ...], bank_query: str | None, k: int) -> list[int]:
    """Round 0's extra seeds: kernels named by id, and the best bank match of up to k problems."""
    from workbench.bank import search

    for kernel_id in ids:
        if store.find("kernels", kernel_id) is None:
            fail(f"--seed {kernel_id}: no kernel {kernel_id} in {store.path}")
    seeds = list(ids)
    if bank_query is not None:
        found = search(store, bank_query)
        if not found:
            fail(f"--seed-from-bank {bank_query!r}: no verified kernel in the bank matches "
                  "(list them with: kernel-workbench bank)")
        best: dict[int, dict] = {}
        for e in found:
            held = best.get(e["problem_id"])
            if held is None or (e["speedup_eager"] or 0) > (held["speedup_eager"] or 0):
                best[e["problem_id"]] = e
        ranked = sorted(best.values(), key=lambda e: -(e["speedup_eager"] or 0))
        seeds += [e["kernel"] for e in ranked[:k] if e["kernel"] not in seeds]
    return seeds


def make_executor(gpus: list[int] | None, on_phase):
    """The local verifier pool (a function so tests can put a double in its place)."""
    from workbench.gpu.pool import LocalPool

    return LocalPool(gpus=gpus, on_phase=on_phase)


@click.command("run")
@click.argument("problem", required=False)
@click.option("--provider", type=click.Choice(PROVIDERS), help="Which LLM API to use.")
@click.option("--model", help="Model name, e.g. o3 or gemini-2.5-pro.")
@click.option("--base-url", help="API base URL (proxies, gateways, local servers).")
@click.option("--reasoning-effort", type=click.Choice(["minimal", "low", "medium", "high"]),
              help="OpenAI reasoning models: how hard to think.")
@click.option("--thinking-budget", type=click.IntRange(0), help="Gemini: thinking tokens per call.")
@click.option("--rounds", type=click.IntRange(1), help="Rounds R (default 5).")
@click.option("--ideas", type=click.IntRange(1), help="Ideas N per seed per round (default 4).")
@click.option("--impls", type=click.IntRange(1), help="Implementations M per idea (default 2).")
@click.option("--top-k", type=click.IntRange(1),
              help="Best kernels that seed the next round (default 4).")
@click.option("--repairs", type=click.IntRange(0),
              help="Repair attempts per failed kernel (default 1).")
@click.option("--refines", type=click.IntRange(0), help="Refinements (a correct kernel sent back "
              "with its hardware evidence to be made faster) for each round's top-k (default 1).")
@click.option("--review/--no-review", default=None, help="Pause after ideation for approval.")
@click.option("--budget-usd", type=click.FloatRange(0),
              help="Stop when the session has spent this much.")
@click.option("--budget-tokens", type=click.IntRange(0),
              help="Stop when the session has used this many tokens.")
@click.option("--budget-minutes", type=click.FloatRange(min=0, min_open=True),
              help="Stop this run after this many minutes (resume to continue).")
@click.option("--budget-gpu-minutes", type=click.FloatRange(min=0, min_open=True),
              help="Stop once verification has used this many GPU minutes.")
@click.option("--stop-at-roofline", type=click.FloatRange(0, 1, min_open=True),
              help="Finish when a kernel reaches this fraction of the roofline floor's speed.")
@click.option("--compile-timeout", "compile_timeout_s", type=click.FloatRange(1),
              help="Seconds one kernel's build may take before its verdict is `timeout` "
                   "(default 300).")
@click.option("--verify-workers", type=click.IntRange(1, 64),
              help="Kernels verified at once (default: from the cores and GPUs here).")
@click.option("--atol", type=click.FloatRange(0),
              help="Absolute tolerance (default: the problem's).")
@click.option("--rtol", type=click.FloatRange(0),
              help="Relative tolerance (default: the problem's).")
@click.option("--no-gpu", is_flag=True, help="Compile and static guards only; kernels unverified.")
@click.option("--baseline", type=click.Choice(["default", "strict", "tf32"]),
              help="Math settings eager and torch.compile are timed under: PyTorch's defaults "
                   "(cuDNN TF32 on), strict fp32, or TF32 everywhere (default: default). "
                   "Correctness is always strict fp32.")
@click.option("--gpu", "gpus", multiple=True, help="GPU index to use (repeat or comma-separate).")
@click.option("--timeout", "timeout_s", type=click.FloatRange(0, min_open=True),
              help="Seconds per LLM call (default 600).")
@click.option("--retries", type=click.IntRange(0), help="Retries on 429/5xx/timeouts (default 4).")
@click.option("--combine/--no-combine", default=None,
              help="From round 1, one kernel per round merging two lineages' best.")
@click.option("--judge-ideas/--no-judge-ideas", default=None,
              help="A model call judges restated ideas before implementation (costed).")
@click.option("--model-for", "model_for", multiple=True,
              help="ROLE=PROVIDER:MODEL[*WEIGHT][@BASE_URL]: a model for ideate, implement, "
                   "repair, refine, judge or combine (repeat for a weighted mix).")
@click.option("--seed", "seed_kernels", multiple=True, type=click.IntRange(min=1),
              help="A kernel (any problem's) to seed round 0 with, besides the reference.")
@click.option("--seed-from-bank", "bank_query",
              help="Seed round 0 with the best bank kernels matching QUERY (see `bank`).")
@click.option("--concurrency", type=click.IntRange(1),
              help="LLM calls at once (default: a round's ideas x impls, at least 4).")
@click.option("--prices", "prices_path", type=click.Path(dir_okay=False),
              help="Price table (TOML) overriding the built-in one.")
@click.option("--prompts", "prompts_dir", type=click.Path(file_okay=False),
              help="Directory of prompt templates overriding the packaged ones.")
@click.option("--resume", "resume_id", type=click.IntRange(1, MAX_ID),
              help="Continue session N where it stopped.")
@db_option
@sandbox_option
def run(problem: str | None, provider: str | None, model: str | None, base_url: str | None,
        atol: float | None, rtol: float | None, compile_timeout_s: float | None,
        verify_workers: int | None, no_gpu: bool,
        baseline: str | None,
        gpus: tuple[str, ...],
        prices_path: str | None, prompts_dir: str | None, resume_id: int | None,
        db_path: str | None, **flags) -> None:
    """Search for fast kernels for PROBLEM: rounds of LLM ideas and implementations, verified."""
    from workbench.llm import ProviderError, load_config, make_provider
    from workbench.llm.base import redact_url
    from workbench.llm.prices import PriceError, PriceTable
    from workbench.llm.redact import URL_MARK
    from workbench.llm.prompts import PromptError, Prompts
    from workbench.problems import ProblemError, load_problem
    from workbench.search import (Engine, SearchError, SearchSettings, default_concurrency,
                                  new_session, problem_of, resume_session)

    search_flags = {k: flags[k] for k in _SEARCH_FLAGS if flags[k] is not None}
    search_flags.update({key: flags[flag] * 60 for flag, key in _MINUTE_FLAGS.items()
                         if flags[flag] is not None})
    if flags["model_for"]:
        from workbench.search.models import parse_specs

        try:
            search_flags["models"] = parse_specs(flags["model_for"])
        except ValueError as e:
            fail(str(e))
    provider_flags = {k: flags[k] for k in _PROVIDER_FLAGS if flags[k] is not None}
    try:
        gpu_list = _gpu_list(gpus)
    except ValueError:
        fail("--gpu takes GPU indexes, e.g. --gpu 0 --gpu 1 or --gpu 0,1")
    warning = check_sandbox()
    if warning:
        click.echo(warning, err=True)
    try:
        config = load_config()
        prices = PriceTable.load(prices_path or config.get("prices"))
        prompts = Prompts(prompts_dir)
    except (ProviderError, PriceError, PromptError) as e:
        fail(str(e))

    if resume_id is not None:
        store = open_store(db_path, existing=True)
        found = store.rows("sessions", "id = ?", [resume_id])
        if not found:
            fail(f"no session {resume_id} in {store.path}")
        session = found[0]
        hold_session(store, resume_id)   # before anything changes the session
        stored = store.settings(resume_id)
        eval_overrides = {k: v for k, v in (("atol", atol), ("rtol", rtol),
                                            ("compile_timeout_s", compile_timeout_s),
                                            ("verify_workers", verify_workers),
                                            ("baseline", baseline))
                          if v is not None}
        if no_gpu:
            eval_overrides["no_gpu"] = True
        options = {**stored.get("provider_options", {}), **provider_flags}
        name = provider or session["provider"]
        model = model or session["model"]
        if not base_url and URL_MARK in (session["base_url"] or ""):
            fail(f"session {resume_id}'s base URL carried a key, which was not stored: pass "
                 "--base-url again")
        base_url = base_url or session["base_url"]
        if not problem_arg_matches(problem, store, resume_id):
            fail(f"session {resume_id} is for problem {problem_of(store, resume_id).name}, "
                  f"not {problem}")
    else:
        if not problem:
            fail("give a PROBLEM (a library name or a file) or --resume SESSION")
        name = provider or config.get("provider")
        model = model or config.get("model")
        base_url = base_url or config.get("base_url")
        options = {**{k: config[k] for k in _PROVIDER_FLAGS if k in config}, **provider_flags}
        options.setdefault("concurrency",
                           default_concurrency(SearchSettings.from_dict(search_flags)))
    try:
        llm = make_provider(name, model, base_url, prices=prices, **options)
    except ProviderError as e:
        fail(str(e))
    if resume_id is None:
        try:
            prob = load_problem(problem)
        except ProblemError as e:
            fail(str(e))
        store = open_store(db_path)   # only once the run can start: no stray kernels.db

    if resume_id is not None:
        eval_settings = {**stored.get("eval", {}), **eval_overrides}
        resume_session(store, resume_id, provider_options=options, eval=eval_settings,
                       **search_flags)
        store.update("sessions", resume_id, provider=name, model=model,
                     base_url=redact_url(base_url))
        session_id = resume_id
    else:
        from workbench.gpu.executor import EvalSettings

        settings = SearchSettings.from_dict(search_flags)
        settings.eval = EvalSettings(atol=atol, rtol=rtol, no_gpu=no_gpu,
                                     baseline=baseline or "default",
                                     verify_workers=verify_workers)
        settings.seed_kernels = _seed_kernels(store, flags["seed_kernels"],
                                              flags["bank_query"], settings.top_k)
        if compile_timeout_s is not None:
            settings.eval.compile_timeout_s = compile_timeout_s
        session_id = new_session(store, prob, name, model, base_url, settings,
                                 provider_options=llm.options())
        hold_session(store, session_id)

    printer = Printer(store)
    try:
        executor = make_executor(gpu_list, printer.phase)
    except ImportError as e:
        fail(f"the local verifier is not available: {e}")
    try:
        engine = Engine(store, session_id, llm, executor, on_event=printer, prompts=prompts)
    except SearchError as e:
        executor.shutdown(cancel=True)
        fail(str(e))
    s = engine.settings
    budget = (f", budget ${s.budget_usd:g}" if s.budget_usd is not None else "") + \
        (f", budget {s.budget_tokens:,} tokens" if s.budget_tokens is not None else "")
    click.echo(f"session {session_id}: {engine.problem.name} with {llm.describe()}; "
               f"{s.rounds} rounds x {s.ideas} ideas x {s.impls} impls, top {s.top_k}, "
               f"{s.repairs} repairs, {s.refines} refines{budget}" + (", no GPU (unverified)" if s.eval.no_gpu else ""))
    previous = signal.signal(signal.SIGINT, interrupt_handler(engine, executor, printer))
    try:
        outcome = engine.run(review=(lambda ids: terminal_review(store, ids))
                             if s.review else None)
    finally:
        signal.signal(signal.SIGINT, previous)
        executor.shutdown(cancel=True)

    print_table(store, session_id)
    session = store.get("sessions", session_id)
    again = f"kernel-workbench run --resume {session_id}" + (f" --db {db_path}" if db_path else "")
    if outcome == "finished":
        click.echo(f"session {session_id} finished")
        return
    if outcome == "review":
        click.echo(f"ideas still wait for review; continue with: {again}")
    else:
        click.echo(f"session {session_id} stopped: {session['stop_reason']}")
        click.echo(f"resume with: {again}")
    sys.exit(1)


def hold_session(store, session_id: int) -> None:
    """Drive the session alone, until exit (between the engine's steps too): another process's
    `run --resume` or app is refused, and this one is refused while another drives it."""
    from workbench import session_lock

    try:
        session_lock.acquire(store.path, session_id)
    except session_lock.SessionLocked as e:
        fail(str(e))


def interrupt_handler(engine, executor, printer: Printer):
    """SIGINT: the first stops cleanly, the second quits now; --resume continues either way.

    First: the session is marked stopped, kernels being verified lose their workers and get no
    verdict (they are verified again on resume, with no repair call), and the run ends once the
    LLM calls in flight are answered and stored. Second: workers are killed and the process
    exits at once (an unanswered call is asked again on resume). Handlers run on the main thread
    between bytecodes, where it may hold any lock: the work happens on threads.
    """
    def quit_now(signum, frame) -> None:
        os.write(2, b"interrupted again: quitting now (resume continues the session)\n")

        def kill_and_exit() -> None:
            executor.shutdown(cancel=True)
            os._exit(130)

        threading.Thread(target=kill_and_exit, daemon=True).start()
        backstop = threading.Timer(3.0, os._exit, [130])   # should the shutdown itself hang
        backstop.daemon = True
        backstop.start()

    def stop(signum, frame) -> None:
        signal.signal(signal.SIGINT, quit_now)

        def stop_engine() -> None:
            engine.cancel("interrupted")
            executor.shutdown(cancel=True)
            printer.line("interrupted: kernels being verified get no verdict and are verified "
                         "again on resume; waiting for the LLM calls in flight (Ctrl-C again "
                         "to quit now)")

        threading.Thread(target=stop_engine, daemon=True).start()

    return stop


def problem_arg_matches(problem: str | None, store, session_id: int) -> bool:
    """With --resume, a PROBLEM argument is optional but must name the session's problem."""
    if not problem:
        return True
    from pathlib import Path

    from workbench.search import problem_of

    return Path(problem).stem == problem_of(store, session_id).name
