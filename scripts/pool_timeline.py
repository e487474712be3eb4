#!/usr/bin/env python3
"""The timeline of a prover pool's jobs, read from `prove_miden --span-events` output.

    RUST_LOG=info,miden_gpu=debug prove_miden --program fib --cycles-log 20 --backend cuda \\
        --pool-jobs 8 --pool-devices '0;0,1' --span-events > pool.log
    python3 scripts/pool_timeline.py pool.log [--jobs 8]

For each pool of the log (a pool's job ids start again from 0), the last `--jobs` jobs (the
timed ones; the untimed warm-up jobs come first) are shown: when each started and ended, and
for each stage of its proof when it began and how long it took, in seconds from the first
job's start. Then, for each slot, how long its committer calls held the device
(`cuda.turn_held`, CUDA only) and the gaps between those calls.
"""
import argparse
import datetime
import re
import sys
from collections import defaultdict

ANSI = re.compile(r'\x1b\[[0-9;]*m')
LINE = re.compile(r'^(\d{4}-\d\d-\d\dT[\d:.]+Z)\s+\w+\s+(.*): ([\w:]+): (new|close.*)$')
# a job's span has its slot once the job is bound to one
JOB = re.compile(r'pool\.job\{job=(\d+)(?: slot=(\d+))?')
STAGES = {
    'execute_program': 'exec',
    'commit_to_main_trace_segment': 'main',
    'build_aux_trace': 'aux build',
    'commit_to_aux_trace_segment': 'aux',
    'evaluate_constraints': 'constraints',
    'commit_to_constraint_evaluations': 'composition',
    'build_deep_composition_poly': 'deep',
    'compute_fri_layers': 'fri',
    'determine_query_positions': 'queries',
    'build_proof_object': 'proof',
}
TURN, JOB_SPAN = 'cuda.turn_held', 'pool.job'


def seconds(stamp):
    moment = datetime.datetime.strptime(stamp[:26].rstrip('Z'), '%Y-%m-%dT%H:%M:%S.%f')
    return moment.replace(tzinfo=datetime.timezone.utc).timestamp()


def read_pools(lines):
    """Per pool, per job: its slot and the (start, end) intervals of each span of interest."""
    pools, pool, last_id, opened = [], None, -1, defaultdict(list)
    for raw in lines:
        match = LINE.match(ANSI.sub('', raw.rstrip('\n')))
        if not match:
            continue
        stamp, context, _target, event = match.groups()
        job = JOB.search(context)
        if not job:
            continue
        job_id, slot = int(job.group(1)), job.group(2)
        name = re.sub(r'\{[^}]*\}', '', context).split(':')[-1]
        if name not in STAGES and name not in (TURN, JOB_SPAN):
            continue
        if name == JOB_SPAN and event == 'new':
            if pool is None or job_id < last_id:
                pool = {}
                pools.append(pool)
            last_id = job_id
        if pool is None:
            continue
        record = pool.setdefault(job_id, {'slot': None, 'spans': defaultdict(list)})
        if slot is not None:
            record['slot'] = int(slot)
        key = (id(pool), job_id, name)
        if event == 'new':
            opened[key].append(seconds(stamp))
        elif opened[key]:
            record['spans'][name].append((opened[key].pop(0), seconds(stamp)))
    return pools


def report(pool, jobs):
    done = sorted(j for j, record in pool.items() if record['spans'].get(JOB_SPAN))
    timed = {j: pool[j] for j in done[-jobs:]}
    if not timed:
        return
    start = min(r['spans'][JOB_SPAN][0][0] for r in timed.values())
    end = max(r['spans'][JOB_SPAN][0][1] for r in timed.values())
    wall = end - start
    slots = sorted({r['slot'] for r in pool.values() if r['slot'] is not None})
    print(f'pool of {len(slots)} slot(s): {len(timed)} jobs in {wall:.2f} s')
    print('job slot  start    end  ' + ' '.join(f'{s:>12}' for s in STAGES.values()))
    for j, record in sorted(timed.items()):
        begin, finish = record['spans'][JOB_SPAN][0]
        cells = []
        for span in STAGES:
            intervals = record['spans'].get(span)
            if intervals:
                took = sum(b - a for a, b in intervals)
                cells.append(f'{intervals[0][0] - start:6.2f}+{took:5.2f}')
            else:
                cells.append(' ' * 12)
        slot = '-' if record['slot'] is None else record['slot']
        print(f'{j:3} {slot:>4} {begin - start:6.2f} {finish - start:6.2f}  ' + ' '.join(cells))
    for slot in slots:
        turns = sorted(
            interval
            for record in pool.values()
            if record['slot'] == slot
            for interval in record['spans'].get(TURN, [])
            if interval[1] > start
        )
        if not turns:
            print(f'slot {slot}: no device turns in the log')
            continue
        held = sum(min(b, end) - max(a, start) for a, b in turns)
        gaps = [max(0.0, turns[i + 1][0] - turns[i][1]) for i in range(len(turns) - 1)]
        print(
            f'slot {slot}: device held {held:.2f} s of {wall:.2f} ({held / wall:.0%}); '
            f'first call at {turns[0][0] - start:.2f} s, last ends {turns[-1][1] - start:.2f} s; '
            f'gaps between calls {sum(gaps):.2f} s (largest {max(gaps, default=0):.2f})'
        )
    print()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('log', nargs='?', help='the log (standard input without it)')
    parser.add_argument('--jobs', type=int, default=8, help='timed jobs per pool (default 8)')
    args = parser.parse_args()
    lines = open(args.log, errors='replace') if args.log else sys.stdin
    for pool in read_pools(lines):
        report(pool, args.jobs)


if __name__ == '__main__':
    main()
