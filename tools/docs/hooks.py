"""MkDocs hooks (mkdocs.yml `hooks:`):

- the reference pages generated from the code (`reference/api.md`, `reference/cli.md`,
  `reference/environment.md`) are committed under docs/reference/ (tools/docs/reference.py
  writes them); the build warns, and so fails under --strict, when one is not what the code
  generates now;
- the benchmark plots of bench/results/ and the scripts of jobs/examples/ are copied into the
  site at that path, so the Benchmarks and Planning pages show the files `make bench` wrote and a
  page can link a script it shows. A page links such a file by its repository path relative to
  its own file (`../bench/results/x.png`, what GitHub shows); the link is mapped to the file's
  place in the site.

Nothing is fetched from anywhere: the build reads this checkout only.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from mkdocs.structure.files import File, Files

sys.path.insert(0, str(Path(__file__).resolve().parent))
import reference  # noqa: E402  (tools/docs/reference.py)

REPO = reference.REPO
COPIED = {"bench/results": "*.png", "jobs/examples": "*.py"}  # repository folder: its files
log = logging.getLogger(f"mkdocs.plugins.{__name__}")


def on_files(files: Files, config) -> Files:
    for name in reference.stale():
        log.warning(f"docs/{name} is not what the code generates: run `make reference`")
    for folder, pattern in COPIED.items():
        for path in sorted((REPO / folder).rglob(pattern)):
            files.append(
                File(str(path.relative_to(REPO)),
                     src_dir=str(REPO),
                     dest_dir=config["site_dir"],
                     use_directory_urls=config["use_directory_urls"]))
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:
    depth = page.file.src_uri.count("/")
    up = "../" * depth
    for folder in COPIED:
        markdown = markdown.replace(f"](../{up}{folder}/", f"]({up}{folder}/")
    return markdown
