"""Writes a copy of a Berth functions library with TIME probes, to see where a function's time goes.
Usage: probe.py LIBRARY.lua OUT.lua LINE:LABEL,LINE:LABEL,... — after each line named (numbered in LIBRARY), the µs
since the last probe are added to LABEL (a `return` line is probed before it returns); a call's first probe is its
fleet_keys; the function prof_dump answers the sums and resets them (cycle.py prints them per phase). LIBRARY as
`FUNCTION LIST WITHCODE` gives it. Each probe is a TIME call: ≈ 1.2 µs of its own."""
import sys
src, dst, spec = sys.argv[1], sys.argv[2], sys.argv[3]
lines = open(src).read().split('\n')
probes = {}
for item in spec.split(','):
    n, label = item.split(':')
    probes[int(n)] = label
out = []
for i, line in enumerate(lines, 1):
    if i in probes and line.lstrip().startswith('return '):
        out.append('local REPLY = ' + line.lstrip()[len('return '):])
        out.append(f"P('{probes.pop(i)}')")
        out.append('return REPLY')
    else:
        out.append(line)
    if i == 35:
        out.append("local PROF, PROF_T = {}, nil\nlocal function P(label) local t = redis.call('TIME') "
                   "local us = tonumber(t[1]) * 1000000 + tonumber(t[2]) "
                   "if PROF_T and label then PROF[label] = (PROF[label] or 0) + us - PROF_T end PROF_T = us end")
    if i in probes:
        out.append(f"P('{probes[i]}')")
text = '\n'.join(out)
text = text.replace("local function fleet_keys(KEYS, names)\n", "local function fleet_keys(KEYS, names)\nPROF_T = nil P(nil)\n", 1)
text += ("\nredis.register_function{function_name = NAME .. '_prof_dump', callback = function() local out = {} "
         "for k, v in pairs(PROF) do out[#out + 1] = k out[#out + 1] = tostring(v) end PROF = {} return out end}\n")
open(dst, 'w').write(text)
