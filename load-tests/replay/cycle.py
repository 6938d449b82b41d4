"""A placement's game-server side, replayed on a quiet copy of a bench's Redis (the port given; see cycle.sh): a game
session of 4 players created on every pooled server but one per location, then each activated, given one more
player, its 4 players accepted and removed, and it ended. Each phase prints its calls' mean time in functions and
commands (the FCALL included) from INFO commandstats around it, and, with a library probe.py wrote, where the time
went; run by icount.sh (ICOUNT_DIR set), the instructions executed in functions per call as callgrind counted them.
OLD=1 calls accept and remove as a library before 4d3cc96 took them (the player session's id, not its game session
and number)."""
import glob
import os
import re
import subprocess
import sys
import uuid

import redis

port = int(sys.argv[1])
r = redis.Redis(port=port, decode_responses=True)
raw = redis.Redis(port=port)
# Berth's library, not the floors the bench loads beside it.
lib = next(l['library_name'] for l in r.execute_command('FUNCTION', 'LIST')
           if l['library_name'].startswith('berth_') and not l['library_name'].startswith('berth_bench_'))
# The fleet keys each function takes, in order, as the library loaded declares them (scripts.rs writes
# `fleet_keys(KEYS, {'act_due', ...})` at the top of each), so that any release's library replays.
code = next(l['library_code'] for l in r.execute_command('FUNCTION', 'LIST', 'LIBRARYNAME', lib, 'WITHCODE')
            if l['library_name'] == lib)
declared = {fn: re.findall(r"'([^']*)'", names) for fn, names in
            re.findall(r"local function fn_(\w+)\(KEYS, ARGV\)\nlocal k = fleet_keys\(KEYS, \{([^}]*)\}\)", code)}

def stats():
    s = r.info('commandstats')
    fc = s.get('cmdstat_fcall', {'calls': 0, 'usec': 0})
    total = sum(v['calls'] for name, v in s.items() if name != 'cmdstat_info')
    return fc['usec'], total, fc['calls']

def instructions():
    """Instructions callgrind counted since its last dump, which this one starts again from."""
    if not os.environ.get('ICOUNT_DIR'):
        return 0
    pid = str(r.info('server')['process_id'])
    subprocess.run(['callgrind_control', '--dump', pid], check=True, capture_output=True)
    newest = max(glob.glob(os.path.join(os.environ['ICOUNT_DIR'], 'out.*')), key=os.path.getmtime)
    summary = next(line for line in open(newest) if line.startswith(('summary:', 'totals:')))
    return int(summary.split()[1])

def phase(name, calls):
    u0, c0, f0 = stats()
    instructions()
    outs = [raw.execute_command('FCALL', f'{lib}_{fn}', len(ks), *ks, *args) for fn, ks, args in calls]
    counted = instructions()
    u1, c1, f1 = stats()
    n = max(f1 - f0, 1)
    line = f'{name:10s} {n:5d} calls  {(u1 - u0) / n:7.1f} µs  {(c1 - c0 - 1) / n:5.1f} commands (FCALL included)'
    if counted:
        line += f'  {counted / n:9.0f} instructions'
    print(line)
    try:
        prof = r.execute_command('FCALL', f'{lib}_prof_dump', 0)
        for label, us in sorted(zip(prof[::2], prof[1::2]), key=lambda x: -float(x[1])):
            print(f'      {label:20s} {float(us) / n:7.1f} µs')
    except redis.ResponseError:
        pass
    return outs

made = []
for pool in r.scan_iter(match='*:lpool:*', count=1000):
    tag, loc = pool.split(':lpool:')
    fleet = tag.split('{f:')[1][:-1]
    for _ in range(r.zcard(pool) - 1):
        sid = f'{fleet}/gsess-{uuid.uuid4()}'
        players = []
        for i in range(4):
            players += [f'player-{uuid.uuid4().hex[:8]}', '']
        made.append((tag, sid, players, loc))
keys = lambda tag, fn: [tag + ':' + n for n in declared[fn]]
creates = [('create_game_session', keys(t, 'create_game_session'),
            [sid, '', loc, 8, 3600000, '', 'digest', '', 1, '', 'name', '[]', '', '', '', sid.split('/')[0], '', '',
             '', '', '', '1'] + p) for t, sid, p, loc in made]
outs = phase('create', creates)
live = []
for (t, sid, p, loc), out in zip(made, outs):
    if out[0] == b'CREATED':
        server = dict(zip(out[6::2], out[7::2]))[b'server'].decode()
        live.append((t, sid, server))
print(f'{len(live)} created of {len(made)}')
phase('activate', [('activate_game_session', keys(t, 'activate_game_session'), (srv, sid))
                   for t, sid, srv in live])
phase('player', [('create_player_sessions', keys(t, 'create_player_sessions'),
                  (sid, f'late-{uuid.uuid4().hex[:8]}', '')) for t, sid, srv in live])
# OLD=1: the arguments of a library before player sessions were named by game session and number.
hosted = lambda sid, p: (sid, p) if os.environ.get('OLD') else (sid, sid, p.rsplit('-', 1)[1])
ps = lambda sid: [sid.replace('/gsess-', '/psess-', 1) + f'-{n}' for n in range(1, 5)]
phase('accept', [('accept_player_session', keys(t, 'accept_player_session'), (srv, *hosted(sid, p)))
                 for t, sid, srv in live for p in ps(sid)])
phase('remove', [('remove_player_session', keys(t, 'remove_player_session'), (srv, *hosted(sid, p)))
                 for t, sid, srv in live for p in ps(sid)])
phase('end', [('end_game_session', keys(t, 'end_game_session'), (srv, sid, 'END')) for t, sid, srv in live])
