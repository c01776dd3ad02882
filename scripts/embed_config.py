#!/usr/bin/env python3
"""Writes a C++ source that holds a config file's text, so the binary carries its defaults."""
import sys

src, out = sys.argv[1], sys.argv[2]
text = open(src, encoding="utf-8").read()
delim = "loomconf"
if ")" + delim + '"' in text:
    sys.exit(f"{src}: contains the raw-string delimiter {delim!r}")
with open(out, "w", encoding="utf-8") as f:
    f.write("// Generated from conf/loom.toml by scripts/embed_config.py. Do not edit.\n")
    f.write("#include \"core/config.hpp\"\n\n")
    f.write("namespace loom {\n\n")
    f.write("std::string_view embedded_config_text() {\n")
    f.write(f'  return R"{delim}({text}){delim}";\n')
    f.write("}\n\n} // namespace loom\n")
