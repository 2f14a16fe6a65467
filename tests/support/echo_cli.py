"""A minimal stand-in for an agent CLI: it reports exactly what it was given, as one JSON line.

echo_cli.py -p PROMPT | --prompt-file PATH      report argv, environment, cwd and prompt
echo_cli.py --version [COUNTER_FILE]            print a version (and count the call)
"""

import json
import os
import sys

args = sys.argv[1:]
if args[:1] == ["--version"]:
    if len(args) > 1:
        with open(args[1], "a") as counter:
            counter.write("called\n")
    print("echo-cli version 3.2.1 (test build)")
    sys.exit(0)

report = {"argv": args, "env": dict(os.environ), "cwd": os.getcwd()}
if args[:1] == ["--prompt-file"]:
    report["prompt_file"] = args[1]
    report["mode"] = oct(os.stat(args[1]).st_mode & 0o777)
    with open(args[1], encoding="utf-8") as file:
        report["prompt"] = file.read()
elif args[:1] == ["-p"]:
    report["prompt"] = args[1]
print(json.dumps(report))
