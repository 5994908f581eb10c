"""MkDocs hooks (mkdocs.yml `hooks:`): pages from outside docs/, and links that work both on
GitHub and on the site.

- README.md becomes the home page, CHANGELOG.md the changelog and benchmarks/README.md the
  benchmarks page, so each text lives in one file that GitHub shows too.
- A relative link is written for the repository (`docs/cosmos.md` in README, `../README.md` in
  docs/). On the site it points to the page that file became; a link to a repository file that
  is no page (`configs/default.yaml`, `../src/...`) becomes the file's name in code, since the
  site cannot serve it. Links to files that do not exist are left alone, so
  `mkdocs build --strict` reports them.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent
# Repository files that become pages: repository path -> page path on the site.
EXTERNAL = {
    "README.md": "index.md",
    "CHANGELOG.md": "changelog.md",
    "benchmarks/README.md": "benchmarks.md",
}
SITE_TO_REPO = {site: repo for repo, site in EXTERNAL.items()}

_FENCE = re.compile(r"^(```|~~~)", re.M)
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)
_LINK = re.compile(r"(!?\[(?:[^\]\\]|\\.)*\])\(([^)\s]+)((?:\s+\"[^\"]*\")?)\)")


def on_files(files: Files, config: Any) -> Files:
    for repo_path, site_path in EXTERNAL.items():
        text = (ROOT / repo_path).read_text(encoding="utf-8")
        files.append(File.generated(config, site_path, content=text))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    site_path = page.file.src_uri
    repo_path = SITE_TO_REPO.get(site_path, f"docs/{site_path}")
    return _outside_code(markdown, lambda text: _LINK.sub(_rewriter(repo_path, site_path), text))


def _outside_code(markdown: str, transform: Any) -> str:
    """Apply `transform` to the text outside fenced code blocks and inline code spans."""
    out: list[str] = []
    in_fence = False
    for block in re.split(r"(^(?:```|~~~)[^\n]*\n?)", markdown, flags=re.M):
        if _FENCE.match(block):
            in_fence = not in_fence
            out.append(block)
        elif in_fence:
            out.append(block)
        else:
            pos, parts = 0, []
            for span in _CODE_SPAN.finditer(block):
                parts += [transform(block[pos : span.start()]), span.group(0)]
                pos = span.end()
            parts.append(transform(block[pos:]))
            out.append("".join(parts))
    return "".join(out)


def _rewriter(repo_path: str, site_path: str) -> Any:
    def rewrite(match: re.Match[str]) -> str:
        label, target, title = match.groups()
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith(("#", "/")):
            return match.group(0)  # external, in-page or absolute: as written
        path, _, anchor = target.partition("#")
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(repo_path), path))
        page = EXTERNAL.get(resolved)
        if page is None and resolved.startswith("docs/"):
            page = resolved.removeprefix("docs/")
        if page is not None:
            link = posixpath.relpath(page, posixpath.dirname(site_path) or ".")
            return f"{label}({link}{'#' + anchor if anchor else ''}{title})"
        if (ROOT / resolved).exists() and not label.startswith("!"):
            text = label[1:-1]
            return f"`{resolved}`" if text.strip("`") == resolved else f"{text} (`{resolved}`)"
        return match.group(0)

    return rewrite
