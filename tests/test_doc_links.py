"""Every relative link and image in the repository's Markdown (README.md, docs/, jobs/, ...) leads
to a file that exists, and every `#anchor` to a heading of its page, read as GitHub shows the
files and as the docs site builds them. No mkdocs, no TensorFlow: the text only."""

import re
import subprocess
import unicodedata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
_FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,}).*?^\1\2`*\s*$", re.M | re.S)
_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)
_LINK = re.compile(
    r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
_REF_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.M)
_HTML_SRC = re.compile(r"<(?:img|a)\b[^>]*\b(?:src|href)=\"([^\"]+)\"", re.I)
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$", re.M)
_EXPLICIT_ID = re.compile(r"\{[^}]*#([\w-]+)[^}]*\}\s*$")
# An anchor of its own in a page's HTML (reference/api.md's `<a id="module.name">` in each heading):
# the same on GitHub and on the site (tests/test_docs.py checks the built ids).
_HTML_ID = re.compile(r"<a id=\"([^\"]+)\"")


def markdown_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "*.md"],
                            cwd=REPO,
                            capture_output=True,
                            text=True,
                            check=True).stdout.split()
    return sorted({REPO / name for name in listed if (REPO / name).is_file()})


def prose(text: str) -> str:
    """The text without fenced code blocks and inline code: links inside them are not links."""
    text = _FENCE.sub("", text)
    return _CODE.sub("", text)


def links(text: str) -> list[str]:
    body = prose(text)
    return _LINK.findall(body) + _REF_DEF.findall(body) + _HTML_SRC.findall(body)


def _plain(title: str) -> str:
    """A heading's text as rendered: no Markdown emphasis, code ticks or link targets."""
    title = _EXPLICIT_ID.sub("", title)
    title = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", title)
    title = re.sub(r"<[^>]+>", "", title)
    return title.replace("`", "").replace("**", "").replace("__", "")


def slug_mkdocs(title: str) -> str:
    """Python-Markdown's toc slugify, which mkdocs uses (mkdocs.yml sets no other)."""
    value = unicodedata.normalize("NFKD", _plain(title)).encode("ascii", "ignore").decode("ascii")
    value = re.sub(r"[^\w\s-]", "", value).strip().lower()
    return re.sub(r"[-\s]+", "-", value)


def slug_github(title: str) -> str:
    """GitHub's heading anchors: lower case, punctuation dropped, each space a hyphen."""
    value = _plain(title).strip().lower()
    value = re.sub(r"[^\w\- ]", "", value)
    return value.replace(" ", "-")


def anchors(page: Path, slug) -> set[str]:
    found, seen = set(), {}
    for _, title in _HEADING.findall(_FENCE.sub("", page.read_text())):
        explicit = _EXPLICIT_ID.search(title)
        base = explicit.group(1) if explicit else slug(title)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}_{count}" if slug is
                  slug_mkdocs else f"{base}-{count}")
    return found


def dead_links(page: Path) -> list[str]:
    dead = []
    for target in links(page.read_text()):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("//"):
            continue  # http:, https:, mailto: ... are not files of the repository
        path, _, anchor = target.partition("#")
        goal = page if not path else (page.parent / path).resolve()
        where = f"{page.relative_to(REPO)}: ({target})"
        if not goal.exists():
            dead.append(
                f"{where}: no file {goal.relative_to(REPO) if goal.is_relative_to(REPO) else goal}")
        elif not goal.is_relative_to(REPO):
            dead.append(f"{where}: outside the repository")
        elif anchor and goal.suffix == ".md" and anchor in _HTML_ID.findall(prose(
                goal.read_text())):
            continue
        elif anchor and goal.suffix == ".md":
            missing = [
                name for name, slug in (("the site", slug_mkdocs), ("GitHub", slug_github))
                if anchor not in anchors(goal, slug)
            ]
            if missing:
                dead.append(f"{where}: no heading with this anchor on {' or '.join(missing)}")
    return dead


def test_the_link_checker_sees_links_and_skips_code():
    text = ("[a](x.md) ![img](p.png 'no') `[c](no.md)` [d][r]\n\n[r]: ref.md\n"
            "```\n[e](fence.md)\n```\n<img src=\"pic.png\"> [f](g.md#h)")
    assert sorted(links(text)) == ["g.md#h", "p.png", "pic.png", "ref.md", "x.md"]
    assert slug_mkdocs("2 nodes × 4 GPUs: your own script") == "2-nodes-4-gpus-your-own-script"
    assert slug_github("2 nodes × 4 GPUs: your own script") == "2-nodes--4-gpus-your-own-script"
    assert slug_mkdocs("Keras 3 under `parameter_server`") == "keras-3-under-parameter_server"


@pytest.mark.parametrize("page", markdown_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_and_image_resolves(page):
    dead = dead_links(page)
    assert not dead, "dead links:\n" + "\n".join(dead)
