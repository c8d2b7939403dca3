"""The search: the CRFM loop of rounds (engine), its decisions (policy) and its store queries.

Users import from here: Engine, SearchSettings, new_session, resume_session, best_kernel, ...
"""
from workbench.search.engine import Engine
from workbench.search.policy import REPAIRABLE
from workbench.search.queries import session_table, spent
from workbench.search.sessions import best_kernel, new_session, problem_of, resume_session
from workbench.search.settings import SearchError, SearchSettings, default_concurrency

__all__ = ["Engine", "REPAIRABLE", "SearchError", "SearchSettings", "best_kernel",
           "default_concurrency", "new_session", "problem_of", "resume_session",
           "session_table", "spent"]
