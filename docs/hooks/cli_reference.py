"""MkDocs hook: the command-line reference, generated from the commands' own help.

A page that holds the line `<!-- stortune-cli -->` gets, in its place, every command and
subcommand of `stortune` (the typer app of `stortune.cli`): its help text, its examples as
console blocks, its usage line and a table of its arguments and options, each option's help,
type, default and environment variable as `stortune COMMAND --help` prints them. Nothing is
written twice: change a command's help and the page follows on the next build.
"""

from __future__ import annotations

import re
from typing import Any

MARKER = "<!-- stortune-cli -->"
PROGRAM = "stortune"

# What the help records append to an option's help, as click and typer print it:
# "  [default: 3]", "  [env var: X; default: Y]", "  [required]", or typer's escaped
# "\[default: ...]." inside the help itself.
_TRAILER = re.compile(r"\s*\\?\[((?:default|env var|required)[^\]]*)\]\.?\s*$")
_CODE = re.compile(r"`([^`]+)`")
# "-c, --config <list[str]>", "--json", "--intensify / --no-intensify", "space <str>"
_DECL = re.compile(r"^(.*?)(?:\s+(<.*>))?$")


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, render_cli())


def render_cli() -> str:
    import typer.main

    from stortune.cli import build_app

    root = typer.main.get_command(build_app())
    root_ctx = root.context_class(root, info_name=PROGRAM)
    out: list[str] = []
    _render(root, root_ctx, [PROGRAM], out, level=2)
    return "\n".join(out)


def _render(cmd: Any, ctx: Any, path: list[str], out: list[str], level: int) -> None:
    name = " ".join(path)
    anchor = "-".join(path[1:]) or PROGRAM
    out.append(f"{'#' * level} `{name}` {{#{anchor}}}\n")
    _help_text(cmd.help or "", out)
    usage = " ".join([name, *cmd.collect_usage_pieces(ctx)])
    out.append(f"**Usage:** `{usage}`\n")
    _params(cmd, ctx, out)
    subcommands = getattr(cmd, "commands", None)
    if not subcommands:
        return
    names = [n for n in cmd.list_commands(ctx) if not subcommands[n].hidden]
    out.append("| Command | What it does |\n|---|---|")
    for sub in names:
        link = "-".join([*path[1:], sub])
        short = _first_paragraph(subcommands[sub].help or "")
        out.append(f"| [<code>{_esc(sub)}</code>](#{link}) | {_cell(short)} |")
    out.append("")
    for sub in names:
        child = subcommands[sub]
        child_ctx = child.context_class(child, info_name=sub, parent=ctx)
        # the root's commands are chapters; a group's subcommands sections beneath them
        _render(child, child_ctx, [*path, sub], out, level=level if len(path) == 1 else level + 1)


def _first_paragraph(text: str) -> str:
    return " ".join(re.split(r"\n\s*\n", text.replace("\b", "").strip())[0].split())


def _help_text(text: str, out: list[str]) -> None:
    """Paragraphs as text, `Example:` paragraphs as one console block."""
    examples: list[str] = []
    for para in re.split(r"\n\s*\n", text.replace("\b", "").strip()):
        lines = [line.strip() for line in para.splitlines() if line.strip()]
        if not lines:
            continue
        if lines[0].startswith("Example:"):
            lines[0] = lines[0][len("Example:") :].strip()
            examples.append("$ " + " \\\n    ".join(line for line in lines if line))
            continue
        _flush_examples(examples, out)
        out.append(_inline(" ".join(lines)) + "\n")
    _flush_examples(examples, out)


def _flush_examples(examples: list[str], out: list[str]) -> None:
    if examples:
        out.append("```console\n" + "\n".join(examples) + "\n```\n")
        examples.clear()


def _params(cmd: Any, ctx: Any, out: list[str]) -> None:
    rows: dict[str, list[str]] = {"argument": [], "option": []}
    for param in cmd.get_params(ctx):
        if getattr(param, "hidden", False) or param.name == "help":
            continue
        record = param.get_help_record(ctx)
        if record is None:
            continue
        decl, help_text = record
        match = _DECL.match(decl.strip())
        names, metavar = (match.group(1), match.group(2) or "") if match else (decl, "")
        names_html = " / ".join(
            ", ".join(f"<code>{_esc(n.strip())}</code>" for n in side.split(",") if n.strip())
            for side in names.split(" / ")
        )
        kind = param.param_type_name if param.param_type_name in rows else "option"
        rows[kind].append(f"| {names_html} | {_metavar(metavar)} | {_describe(help_text)} |")
    for kind, title in (("argument", "Argument"), ("option", "Option")):
        if rows[kind]:
            out.append(f"| {title} | Type | Description |\n|---|---|---|")
            out.extend(rows[kind])
            out.append("")


def _metavar(metavar: str) -> str:
    metavar = metavar.strip()
    if metavar.startswith("<") and metavar.endswith(">"):
        metavar = metavar[1:-1]
    return f"<code>{_esc(metavar)}</code>" if metavar else ""


def _describe(help_text: str) -> str:
    """An option's help with its bracketed default, environment variable and `required`
    turned into labelled notes."""
    notes: list[str] = []
    text = help_text.strip()
    while True:
        match = _TRAILER.search(text)
        if not match:
            break
        text = text[: match.start()].rstrip()
        for item in reversed([i.strip() for i in match.group(1).split(";") if i.strip()]):
            key, _, value = item.partition(":")
            value = value.strip()
            if key == "required":
                notes.insert(0, "<strong>Required.</strong>")
            elif key == "env var":
                notes.insert(0, f"Environment: <code>{_esc(value)}</code>.")
            else:
                notes.insert(0, f"Default: {_cell(value)}.")
    if text and not text.endswith((".", "?", "!")):
        text += "."
    return " ".join([_cell(text), *notes]).strip()


def _cell(text: str) -> str:
    """Help text for a table cell: markdown's code spans as <code>, the rest escaped, so no
    `|`, `*`, `_` or `[` of an option's syntax is read as markdown."""
    return _inline(text)


def _inline(text: str) -> str:
    text = text.replace("\\[", "[")
    parts = _CODE.split(text)
    return "".join(
        f"<code>{_esc(part)}</code>" if i % 2 else _esc(part) for i, part in enumerate(parts)
    )


# HTML's own characters, and those markdown would read inside a table cell or a paragraph
_ESCAPES = str.maketrans({c: f"&#{ord(c)};" for c in "&<>|*_[]\\`"})


def _esc(text: str) -> str:
    return text.translate(_ESCAPES)
