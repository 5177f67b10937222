#!/usr/bin/env python3
"""An example Clutch worker agent on the Python client (clients/python): it registers its card, heartbeats,
reads its inbox and works each task routed to it (task.accept, a task.progress, a task.result), deduplicating
deliveries by (task_id, attempt) and stopping when the task is cancelled. With --never-accept it takes
deliveries but never accepts them (the tests use it to watch redelivery and failover). One line per thing it
does on stdout; the integration tests (tests/it/workers.rs) read them. By hand, against a running daemon:

    .tools/venv/bin/python crates/clutch/tests/workers/worker.py --name ken --skill skill:research
"""

import argparse
import asyncio
import logging
import os
import sys

import clutch

p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
p.add_argument("--url", default="http://127.0.0.1:7700", help="the daemon's base URL")
p.add_argument("--name", required=True, help="the agent's name: it registers as agent:NAME")
p.add_argument("--skill", action="append", required=True, help="a capability, e.g. skill:research@1.2.0; repeatable")
p.add_argument("--max-concurrency", type=int, default=4, help="tasks it works on at once")
p.add_argument("--work-seconds", type=float, default=0.1, help="how long each task takes")
p.add_argument("--never-accept", action="store_true", help="receive tasks but never accept them")
p.add_argument("--token", default=os.environ.get("CLUTCH_TOKEN"), help="API token (or CLUTCH_TOKEN)")
args = p.parse_args()
logging.basicConfig(stream=sys.stdout, level=logging.WARNING, format="%(message)s")
logging.getLogger("clutch").setLevel(logging.INFO)


async def work(task: clutch.Task):
    if args.never_accept:
        logging.getLogger("clutch").info("%s task %s attempt %s: received, not accepting", task.agent_id, task.id, task.attempt)
        await asyncio.Event().wait()  # until cancelled
    await asyncio.sleep(args.work_seconds / 2)
    await task.progress(percent=50, usage={"tokens": 10})
    await asyncio.sleep(args.work_seconds / 2)
    return {"text": f"done by {task.agent_id}", "usage": {"tokens": 5}}


agent = clutch.Agent(args.name, args.skill, work, url=args.url, token=args.token, max_concurrency=args.max_concurrency,
                     description="example worker (worker.py)", auto_accept=not args.never_accept)
agent.run()
