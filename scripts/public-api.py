#!/usr/bin/env python3
"""Lists the crate's public API from rustdoc's JSON: one line per reachable item.

    RUSTC_BOOTSTRAP=1 RUSTDOCFLAGS="-Z unstable-options --output-format json" \
        cargo doc --no-deps --lib --features cuda,miden
    python3 scripts/public-api.py target/doc/miden_gpu.json

An equivalent of `cargo public-api` on the stable toolchain (which has no nightly to run it).
"""
import json
import sys

doc = json.load(open(sys.argv[1]))
index, root = doc["index"], doc["root"]
lines = set()


def kind_of(item):
    return next(iter(item["inner"])) if isinstance(item["inner"], dict) else item["inner"]


def walk(item_id, path):
    item = index.get(str(item_id))
    if item is None:
        return
    kind = kind_of(item)
    inner = item["inner"][kind] if isinstance(item["inner"], dict) else {}
    name = item.get("name")
    if kind == "use":
        target = inner.get("id")
        if target is not None and str(target) in index:
            walk(target, path if inner.get("is_glob") else path)
        return
    here = path + [name] if name else path
    if kind == "module":
        for child in inner.get("items", []):
            walk(child, here)
        return
    lines.add(f"{kind} {'::'.join(here)}")
    if kind in ("struct", "enum", "trait"):
        for field in inner.get("kind", {}).get("plain", {}).get("fields", []) if kind == "struct" and isinstance(inner.get("kind"), dict) else []:
            f = index.get(str(field))
            if f:
                lines.add(f"field {'::'.join(here)}::{f['name']}")
        for variant in inner.get("variants", []):
            v = index.get(str(variant))
            if v:
                lines.add(f"variant {'::'.join(here)}::{v['name']}")
        for impl_id in inner.get("impls", []):
            impl = index.get(str(impl_id))
            if not impl:
                continue
            body = impl["inner"]["impl"]
            if body.get("trait") is not None or body.get("is_synthetic") or body.get("blanket_impl"):
                continue
            for method in body.get("items", []):
                m = index.get(str(method))
                if m and m.get("visibility") == "public":
                    lines.add(f"{kind_of(m)} {'::'.join(here)}::{m['name']}")
        for method in inner.get("items", []):
            m = index.get(str(method))
            if m:
                lines.add(f"{kind_of(m)} {'::'.join(here)}::{m['name']}")


walk(root, [])
print("\n".join(sorted(lines)))
