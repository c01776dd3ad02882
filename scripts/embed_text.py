#!/usr/bin/env python3
"""Writes a C++ source whose function returns a file's text, so the binary carries it:
   embed_text.py SRC OUT HEADER FUNCTION   (FUNCTION may be qualified: loom::replay::x)."""
import sys

src, out, header, function = sys.argv[1:5]
text = open(src, encoding="utf-8").read()
delim = "loomembed"
if ")" + delim + '"' in text:
    sys.exit(f"{src}: contains the raw-string delimiter {delim!r}")
# Raw-string pieces of at most 16 KB: compilers bound a single literal's length.
chunk = 16000
pieces = [text[i:i + chunk] for i in range(0, len(text), chunk)] or [""]
*spaces, name = function.split("::")
with open(out, "w", encoding="utf-8") as f:
    f.write(f"// Generated from {src.split('/')[-1]} by scripts/embed_text.py. Do not edit.\n")
    f.write(f'#include "{header}"\n\n#include <string>\n\n')
    if spaces:
        f.write(f"namespace {'::'.join(spaces)} {{\n\n")
    f.write(f"std::string_view {name}() {{\n  static const std::string text = std::string{{}}\n")
    for p in pieces:
        f.write(f'    + R"{delim}({p}){delim}"\n')
    f.write("    ;\n  return text;\n}\n")
    if spaces:
        f.write(f"\n}} // namespace {'::'.join(spaces)}\n")
