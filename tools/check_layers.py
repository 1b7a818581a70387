#!/usr/bin/env python3
"""check_layers.py ROOT STAMP: fail when a file includes a header of a layer
above its own, so the layering of docs/architecture.md holds by construction:

    base <- kernels, compress, schedules <- stages <- runtime

(tests/, bench/ and examples/ may include anything). Writes STAMP on success.
"""
import os
import re
import sys

# what each folder may include, besides itself
ALLOWED = {
    "base": set(),
    "kernels": {"base"},
    "compress": {"base"},
    "schedules": {"base"},
    "stages": {"base", "kernels"},
    "runtime": {"base", "kernels", "compress", "schedules", "stages"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/[^"]+"', re.M)


def main():
    root, stamp = sys.argv[1], sys.argv[2]
    bad = []
    for layer, allowed in ALLOWED.items():
        for dirpath, _, names in os.walk(os.path.join(root, layer)):
            for name in sorted(names):
                if not name.endswith((".c", ".h", ".cu", ".cuh")):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                for m in INCLUDE.finditer(text):
                    top = m.group(1)
                    if top != layer and top in ALLOWED and top not in allowed:
                        line = text.count("\n", 0, m.start()) + 1
                        rel = os.path.relpath(path, root)
                        bad.append(f"{rel}:{line}: {layer}/ may not include {top}/ (a layer above it)")
    if bad:
        print("layer check failed: base <- kernels, compress, schedules <- stages <- runtime", file=sys.stderr)
        print("\n".join(bad), file=sys.stderr)
        return 1
    with open(stamp, "w") as f:
        f.write("ok\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
