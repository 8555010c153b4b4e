#!/usr/bin/env python3
"""Write docs/reference/<header>.md from the comments of the public headers.

Usage: scripts/refdoc.py [OUTDIR]   (default: docs/reference)

Each page: the header's opening comment as the introduction, then every
declaration (or group of declarations written together) as a code block
followed by the comment written above it. A comment of the form
/* ---- title ---- */ starts a section. Run it after changing a header;
the pages are generated, so edit the header, not the page.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HDRS = os.path.join(ROOT, "framework", "include", "spindle")
SKIP = re.compile(r'^\s*(#\s*(ifndef|endif|ifdef __cplusplus|include)|'
                  r'extern "C" \{|\}$)')


def comment_text(lines):
    """Lines of a /* */ comment -> plain text paragraphs (markdown)."""
    out = []
    for ln in lines:
        ln = ln.strip()
        ln = re.sub(r'^/\*+', '', ln)
        ln = re.sub(r'\*+/$', '', ln)
        ln = re.sub(r'^\* ?', '', ln)
        out.append(ln.rstrip())
    if out:
        out[0] = out[0].lstrip()
    text = "\n".join(out).strip("\n")
    # Lines indented in the comment (lists, examples) keep their breaks.
    return text


def names_of(decl):
    """Identifiers a declaration introduces, for its heading."""
    names = []
    flat = re.sub(r'/\*.*?\*/', '', decl, flags=re.S)
    bodies = []
    while re.search(r'\{[^{}]*\}', flat):
        flat = re.sub(r'\{([^{}]*)\}',
                      lambda m: bodies.append(m.group(1)) or
                      '<@%d>' % (len(bodies) - 1), flat, count=1)
    for stmt in flat.split(';'):
        s = stmt.strip()
        if not s:
            continue
        m = re.match(r'#\s*define\s+(\w+)', s)
        if m:
            names.append(m.group(1))
            continue
        if s.startswith('typedef') or s.startswith('enum') or \
                s.startswith('struct'):
            if '<@' in s:
                tail = s[s.rindex('>') + 1:].strip()
                tag = re.match(r'(?:typedef\s+)?(?:enum|struct|union)\s+(\w+)', s)
                if re.match(r'^\w+$', tail):
                    names.append(tail)
                elif tag:
                    names.append(tag.group(1))
                else:
                    b = re.search(r'<@(\d+)>', s)
                    body = bodies[int(b.group(1))] if b else ''
                    body = re.sub(r'<@\d+>', '', body)
                    names += re.findall(r'\b(SP_\w+)\b\s*(?:=|,|$)', body)
                continue
            if '(*' in s:
                m = re.search(r'\(\s*\*\s*(\w+)\s*\)', s)
            else:
                m = re.search(r'(\w+)\s*(\[[^\]]*\])?\s*$', s)
            if m and m.group(1) not in ('enum', 'struct'):
                names.append(m.group(1))
            continue
        m = re.search(r'(\w+)\s*\(', s)
        if m:
            names.append(m.group(1))
    seen = []
    for n in names:
        if n not in seen:
            seen.append(n)
    return seen


def parse(path):
    with open(path) as f:
        lines = f.read().split("\n")
    i = 0
    intro = []
    # the opening comment
    if lines and lines[0].lstrip().startswith("/*"):
        while i < len(lines):
            intro.append(lines[i])
            if "*/" in lines[i]:
                i += 1
                break
            i += 1
    items = []          # ('section', title) | ('decl', comment, code)
    pending = None      # comment lines waiting for their declaration
    code = []
    depth = 0
    in_define = False

    def flush_code():
        nonlocal code, pending
        if code:
            items.append(('decl', pending, "\n".join(code).rstrip()))
            code = []
            pending = None

    while i < len(lines):
        ln = lines[i]
        s = ln.strip()
        if depth == 0 and not code and not in_define:
            if not s:
                if pending:
                    items.append(('note', pending))
                    pending = None
                i += 1
                continue
            if SKIP.match(ln) or re.match(r'#\s*define\s+SPINDLE_\w+_H\s*$', s):
                i += 1
                continue
            if s.startswith("/*"):
                block = [ln]
                while "*/" not in lines[i]:
                    i += 1
                    block.append(lines[i])
                i += 1
                text = comment_text(block)
                m = re.match(r'^-+\s*(.*?)\s*-+$', text)
                if m:
                    if pending:
                        items.append(('note', pending))
                        pending = None
                    items.append(('section', m.group(1)))
                else:
                    pending = (pending + "\n" if pending else "") + text
                continue
        # a declaration line
        if not s and depth == 0 and not in_define:
            flush_code()
            i += 1
            continue
        if depth == 0 and not in_define and s.startswith("/*") and code \
                and not s.endswith("*/"):
            # a multi-line comment after code: ends the group
            flush_code()
            continue
        if depth == 0 and not in_define and s.startswith("/*") and code:
            flush_code()
            continue
        code.append(ln)
        if s.startswith("#"):
            in_define = s.endswith("\\")
        elif in_define:
            in_define = s.endswith("\\")
        else:
            depth += ln.count("{") - ln.count("}")
        i += 1
    flush_code()
    if pending:
        items.append(('note', pending))
    return comment_text(intro), items


def render(name, intro, items):
    out = ["# `spindle/%s`" % name, "",
           "Generated from `framework/include/spindle/%s` by "
           "`scripts/refdoc.py`; the header is the source. "
           "[All headers](README.md)." % name, ""]
    if intro:
        out += [intro, ""]
    for it in items:
        if it[0] == 'section':
            out += ["## " + it[1][0].upper() + it[1][1:], ""]
        elif it[0] == 'note':
            out += [it[1], ""]
        else:
            _, comment, code = it
            names = names_of(code)
            if names:
                out += ["### " + ", ".join("`%s`" % n for n in names), ""]
            out += ["```c", code, "```", ""]
            if comment:
                out += [comment, ""]
    return "\n".join(out).rstrip() + "\n"


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else \
        os.path.join(ROOT, "docs", "reference")
    os.makedirs(outdir, exist_ok=True)
    index = ["# API reference", "",
             "One page per public header, generated from the headers' own "
             "comments by `scripts/refdoc.py` (run it after changing a "
             "header). Conventions shared by every header (errors, units, "
             "threads) are in [the guide](../guide.md).", "",
             "| header | what |", "|---|---|"]
    for h in sorted(os.listdir(HDRS)):
        if not h.endswith(".h"):
            continue
        intro, items = parse(os.path.join(HDRS, h))
        page = h[:-2] + ".md"
        with open(os.path.join(outdir, page), "w") as f:
            f.write(render(h, intro, items))
        first = intro.split("\n\n")[0].replace("\n", " ")
        first = re.sub(r'^spindle\s+', '', first)
        index.append("| [`spindle/%s`](%s) | %s |" % (h, page, first))
    with open(os.path.join(outdir, "README.md"), "w") as f:
        f.write("\n".join(index) + "\n")


if __name__ == "__main__":
    main()
