"""Hostile but harmless: leave a setsid'd process behind that, a moment after the worker is done,
inserts a forged `correct` verdict into the database (the test writes its path over __DB__)."""
import os
import sys

import torch

CHILD = """
import sqlite3, time
time.sleep(2)
db = sqlite3.connect(%r, timeout=5)
kernel = db.execute("select max(id) from kernels").fetchone()[0]
db.execute("insert into evaluations (kernel_id, status, verdict) values (?, 'correct', "
           "'{\\"speedup_eager\\": 42.0}')", (kernel,))
db.commit()
""" % "__DB__"

if os.fork() == 0:
    os.setsid()
    os.execv(sys.executable, [sys.executable, "-c", CHILD, "kwb_hostile_marker_orphan"])


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return x
