#!/usr/bin/env python3
"""Loom's layers, checked: types -> cores -> actors -> edges -> replay -> app.

meson passes each layer's files (sources and headers) as `--layer NAME FILE...`, in order.
A file may include (with "...") only files of its own or an earlier layer; files of the
types and cores layers include no CAF header (<caf/...>); every .cpp/.hpp under src/,
drivers/, replay/ and include/ belongs to exactly one layer. Exits 1 listing every breach.
`--self-test` checks that a tree with breaches is caught.
"""

import os
import re
import sys
import tempfile

INCLUDE_ROOTS = ["src", ".", "include"]
GENERATED = {"loom.pb.h": "cores"}  # protoc output: the wire and storage schema
NO_CAF = {"types", "cores"}
SCANNED = ["src", "drivers", "replay", "include"]
QUOTED = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
ANGLED = re.compile(r'^\s*#\s*include\s*<([^>]+)>')


def parse_args(argv):
    root, layers, current = None, [], None
    it = iter(argv)
    for arg in it:
        if arg == "--root":
            root = next(it)
        elif arg == "--layer":
            current = (next(it), [])
            layers.append(current)
        elif current is not None:
            current[1].append(arg)
        else:
            raise SystemExit(f"check_layers: unexpected argument {arg}")
    if root is None or not layers:
        raise SystemExit("usage: check_layers.py --root DIR --layer NAME FILE... [--layer ...]")
    return root, layers


def check(root, layers):
    """Every breach in the tree at `root`, as readable lines."""
    rank, layer_of, problems = {}, {}, []
    for i, (name, files) in enumerate(layers):
        rank[name] = i
        for f in files:
            rel = os.path.relpath(os.path.abspath(f), root)
            if rel in layer_of:
                problems.append(f"{rel}: listed in layers {layer_of[rel]} and {name}")
            layer_of[rel] = name
    for top in SCANNED:
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for n in names:
                rel = os.path.relpath(os.path.join(dirpath, n), root)
                if n.endswith((".cpp", ".hpp")) and rel not in layer_of:
                    problems.append(f"{rel}: in no layer (list it in meson.build)")
    for rel, layer in sorted(layer_of.items()):
        problems += check_file(root, rel, layer, rank, layer_of)
    return problems


def resolve(root, target):
    for base in INCLUDE_ROOTS:
        rel = os.path.normpath(os.path.join(base, target))
        if os.path.exists(os.path.join(root, rel)):
            return rel
    return None


def check_file(root, rel, layer, rank, layer_of):
    out = []
    with open(os.path.join(root, rel), encoding="utf-8") as f:
        lines = f.read().splitlines()
    for no, line in enumerate(lines, 1):
        angled = ANGLED.match(line)
        if angled and layer in NO_CAF and angled.group(1).startswith("caf/"):
            out.append(f"{rel}:{no}: a {layer} file includes CAF ({angled.group(1)})")
        quoted = QUOTED.match(line)
        if not quoted:
            continue
        target = quoted.group(1)
        if target in GENERATED:
            dep_layer = GENERATED[target]
        else:
            dep = resolve(root, target)
            if dep is None:
                out.append(f"{rel}:{no}: includes {target}, which is not in the tree")
                continue
            dep_layer = layer_of.get(dep)
            if dep_layer is None:
                continue  # reported as in no layer
        if rank[dep_layer] > rank[layer]:
            out.append(f"{rel}:{no}: the {layer} layer includes {target} of the later "
                       f"{dep_layer} layer")
    return out


def self_test():
    """A tree with one breach of each rule must yield exactly those breaches."""
    files = {
        "src/a/types.hpp": '#include <string>\n',
        "src/a/core.hpp": '#include "a/types.hpp"\n#include <caf/expected.hpp>\n',
        "src/a/core.cpp": '#include "a/core.hpp"\n#include "a/actor.hpp"\n',
        "src/a/actor.hpp": '#include <caf/typed_actor.hpp>\n#include "a/core.hpp"\n',
        "src/a/stray.hpp": '#include "a/types.hpp"\n',
    }
    with tempfile.TemporaryDirectory() as root:
        for rel, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w", encoding="utf-8") as f:
                f.write(text)
        layers = [("types", [os.path.join(root, "src/a/types.hpp")]),
                  ("cores", [os.path.join(root, "src/a/core.hpp"),
                             os.path.join(root, "src/a/core.cpp")]),
                  ("actors", [os.path.join(root, "src/a/actor.hpp")])]
        got = check(root, layers)
    want = [
        "src/a/stray.hpp: in no layer (list it in meson.build)",
        "src/a/core.cpp:2: the cores layer includes a/actor.hpp of the later actors layer",
        "src/a/core.hpp:2: a cores file includes CAF (caf/expected.hpp)",
    ]
    if sorted(got) != sorted(want):
        print("check_layers self-test failed:\n  got:  " + "\n        ".join(got)
              + "\n  want: " + "\n        ".join(want))
        return 1
    print("check_layers self-test: ok (3 planted breaches caught, nothing else)")
    return 0


def main(argv):
    if argv == ["--self-test"]:
        return self_test()
    root, layers = parse_args(argv)
    problems = check(os.path.abspath(root), layers)
    for p in problems:
        print(p)
    counted = sum(len(f) for _, f in layers)
    if problems:
        print(f"{len(problems)} layering breaches in {counted} files")
        return 1
    print(f"layers ok: {counted} files in {len(layers)} layers, "
          + " -> ".join(name for name, _ in layers))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
