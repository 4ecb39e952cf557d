"""``hub/web/static/markdown.js`` in Chromium, table-driven: each case is markdown an agent
might send and the exact HTML the renderer must build from it (``innerHTML`` of a container).

The renderer builds DOM nodes, never HTML strings: ``&lt;`` in an expectation is a ``<`` the
agent wrote, shown as text. Beyond the table: hostile inputs render only the elements and
attributes the renderer is allowed to make, and every prefix of a streamed answer renders
(a message is drawn many times while it streams) without a link to an unsafe URL.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

RENDER = """
async (cases) => {
  const { renderMarkdown } = await import('/static/markdown.js');
  return cases.map((text) => {
    const box = document.createElement('div');
    box.append(renderMarkdown(text));
    return box.innerHTML;
  });
}
"""

AUDIT = (Path(__file__).parent / "js" / "markdown_audit.js").read_text()

A = 'rel="noopener noreferrer" target="_blank"'


def host(where: str) -> str:
    """The note of where a link goes, shown when its text is not the address."""
    return f'<span class="link-host"> ({where})</span>'


# Cases of their own: table rows alike in shape only.
CASES: list[tuple[str, str, str]] = [
    # --- links ---------------------------------------------------------------------------
    (
        "link",
        "[docs](https://example.com/a?b=1&c=2)",
        f'<p><a href="https://example.com/a?b=1&amp;c=2" {A}>docs{host("example.com")}</a></p>',
    ),
    (
        "link with title",
        '[a](https://e.com "title")',
        f'<p><a href="https://e.com/" {A}>a{host("e.com")}</a></p>',
    ),
    (
        "mailto link",
        "mail [me](mailto:a@example.com)",
        f'<p>mail <a href="mailto:a@example.com" {A}>me{host("a@example.com")}</a></p>',
    ),
    (
        "autolink",
        "<https://example.com>",
        f'<p><a href="https://example.com/" {A}>https://example.com</a></p>',
    ),
    (
        "bare url, trailing dot left out",
        "see https://example.com/x. next",
        f'<p>see <a href="https://example.com/x" {A}>https://example.com/x</a>. next</p>',
    ),
    (
        "emphasis inside a link",
        "[**bold** link](https://e.com)",
        f'<p><a href="https://e.com/" {A}><strong>bold</strong> link{host("e.com")}</a></p>',
    ),
    (
        "image: a link, never loaded",
        "![alt](https://example.com/i.png)",
        f'<p><a href="https://example.com/i.png" {A}>image: alt{host("example.com")}</a></p>',
    ),
    ("javascript: link", "[x](javascript:alert(1))", "<p>[x](javascript:alert(1))</p>"),
    ("javascript: mixed case", "[x](JaVaScRiPt:alert(1))", "<p>[x](JaVaScRiPt:alert(1))</p>"),
    ("javascript: with a tab", "[x](java\tscript:alert(1))", "<p>[x](java\tscript:alert(1))</p>"),
    ("javascript: after a space", "[x]( javascript:alert(1))", "<p>[x]( javascript:alert(1))</p>"),
    ("javascript: autolink", "<javascript:alert(1)>", "<p>&lt;javascript:alert(1)&gt;</p>"),
    ("javascript: image", "![a](javascript:alert(1))", "<p>![a](javascript:alert(1))</p>"),
    ("data: link", "[x](data:text/html,<b>)", "<p>[x](data:text/html,&lt;b&gt;)</p>"),
    ("vbscript: link", "[x](vbscript:msgbox)", "<p>[x](vbscript:msgbox)</p>"),
    ("relative link", "[x](/relative/path)", "<p>[x](/relative/path)</p>"),
    # --- code ----------------------------------------------------------------------------
    (
        "inline code keeps markup as text",
        "use `a < b && c`",
        "<p>use <code>a &lt; b &amp;&amp; c</code></p>",
    ),
    (
        "double backticks hold a backtick",
        "``code with ` tick``",
        "<p><code>code with ` tick</code></p>",
    ),
    (
        "fenced code with its language",
        "```python\ndef f():\n    return '<b>'\n```",
        '<div class="md-code"><div class="md-code-lang">python</div><pre tabindex="0">'
        "<code data-language=\"python\">def f():\n    return '&lt;b&gt;'</code></pre></div>",
    ),
    (
        "tilde fence",
        "~~~\ntilde\n~~~",
        '<div class="md-code"><pre tabindex="0"><code>tilde</code></pre></div>',
    ),
    ("no emphasis inside code", "`*a*` *b*", "<p><code>*a*</code> <em>b</em></p>"),
    # --- tables --------------------------------------------------------------------------
    (
        "table with alignment, code with a pipe, a short row",
        "| a | b |\n|:--|--:|\n| `x|y` | **z** |\n| only |",
        '<div class="md-table" tabindex="0"><table><thead><tr><th class="align-left">a</th>'
        '<th class="align-right">b</th></tr></thead><tbody><tr><td class="align-left">'
        '<code>x|y</code></td><td class="align-right"><strong>z</strong></td></tr>'
        '<tr><td class="align-left">only</td>'
        '<td class="align-right"></td></tr></tbody></table></div>',
    ),
    (
        "table without body",
        "| a | b |\n|---|---|",
        '<div class="md-table" tabindex="0"><table><thead><tr><th>a</th><th>b</th></tr></thead>'
        "<tbody></tbody></table></div>",
    ),
    (
        "escaped pipe",
        "| a \\| b |\n|---|\n| c |",
        '<div class="md-table" tabindex="0"><table><thead><tr><th>a | b</th></tr></thead>'
        "<tbody><tr><td>c</td></tr></tbody></table></div>",
    ),
    # --- nesting -------------------------------------------------------------------------
    (
        "nested list",
        "- one\n- two\n  - nested\n- three",
        "<ul><li>one</li><li><p>two</p><ul><li>nested</li></ul></li><li>three</li></ul>",
    ),
    ("ordered list keeps its start", "3. c\n4. d", '<ol start="3"><li>c</li><li>d</li></ol>'),
    (
        "quote in a quote",
        "> quote\n> > inner",
        "<blockquote><p>quote</p><blockquote><p>inner</p></blockquote></blockquote>",
    ),
    ("strong in em", "*a **b** c*", "<p><em>a <strong>b</strong> c</em></p>"),
    ("em in strong", "**a *b* c**", "<p><strong>a <em>b</em> c</strong></p>"),
    ("em closing after strong", "*a **b***", "<p><em>a <strong>b</strong></em></p>"),
    (
        "underscores inside words",
        "snake_case_word and _em_",
        "<p>snake_case_word and <em>em</em></p>",
    ),
    ("strikethrough", "~~gone~~", "<p><del>gone</del></p>"),
    (
        "headings shift down two levels",
        "# H1\n###### H6",
        '<h3 class="md-h md-h1">H1</h3><h6 class="md-h md-h6">H6</h6>',
    ),
    ("rules", "***\n---", "<hr><hr>"),
    ("hard break", "line one  \nline two", "<p>line one<br>line two</p>"),
    ("escapes", "a\\*b\\*", "<p>a*b*</p>"),
    # --- unterminated input, as it is mid-stream --------------------------------------------
    (
        "unterminated fence",
        "```js\nconst a = 1;",
        '<div class="md-code"><div class="md-code-lang">js</div><pre tabindex="0">'
        '<code data-language="js">const a = 1;</code></pre></div>',
    ),
    ("unterminated bold", "**unclosed bold", "<p>**unclosed bold</p>"),
    ("unterminated code span", "`unterminated code", "<p>`unterminated code</p>"),
    ("unterminated link", "[text](", "<p>[text](</p>"),
    (
        "unterminated link destination: the url alone is linked",
        "[unclosed link](https://e.com",
        f'<p>[unclosed link](<a href="https://e.com/" {A}>https://e.com</a></p>',
    ),
    ("unterminated javascript: link", "[x](javascript:alert(1)", "<p>[x](javascript:alert(1)</p>"),
    (
        "table header alone",
        "| a | b |\n|--",
        '<div class="md-table" tabindex="0"><table><thead><tr><th>a</th><th>b</th></tr></thead>'
        "<tbody></tbody></table></div>",
    ),
    # --- hostile input ---------------------------------------------------------------------
    ("html is text", "<img src=x onerror=alert(1)>", "<p>&lt;img src=x onerror=alert(1)&gt;</p>"),
    ("script is text", "<script>alert(1)</script>", "<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>"),
    ("entities are not decoded", "&lt; &amp;", "<p>&amp;lt; &amp;amp;</p>"),
    (
        "html in a table cell",
        "| <b>x</b> |\n|---|",
        '<div class="md-table" tabindex="0"><table><thead><tr><th>&lt;b&gt;x&lt;/b&gt;</th>'
        "</tr></thead><tbody></tbody></table></div>",
    ),
    (
        "html in a code fence language",
        "```<img/src/onerror=alert(1)>\nx\n```",
        '<div class="md-code"><div class="md-code-lang">&lt;img/src/onerror=alert(1)&gt;</div>'
        '<pre tabindex="0"><code data-language="&lt;img/src/onerror=alert(1)&gt;">x</code>'
        "</pre></div>",
    ),
]

HOSTILE = [
    ">" * 5000 + " deep quote",
    "- " * 2000 + "deep list",
    "[" * 20000,
    "[a](" * 5000,
    "*a" * 20000,
    "`" * 10000,
    "_" * 20000,
    "~~" * 10000,
    "| a " * 3000 + "|\n" + "|---" * 3000 + "|\n" + "| x " * 3000,
    "<" * 10000 + "https://e.com",
    "[x](https://e.com/" + "(" * 5000 + ")",
    "https://" + "a" * 100_000,
    "\u202eevil\u202c [x](https://e.com/\u0000)",
    "[x](https://e.com\u0000javascript:alert(1))",
    "```\n" + "\n" * 20000,
]

ANSWER = """# Plan

I will **change** `parse()` in [the parser](https://example.com/parser) and *not* touch
[that](javascript:alert(1)):

1. split the tokenizer
2. run the tests
   - unit
   - integration

| step | state |
|:-----|------:|
| one  | done  |

```python
def parse(source: str) -> list[str]:
    return source.split()
```

> Note: ~~old~~ new.
"""


@pytest.mark.parametrize(("text", "html"), [(c[1], c[2]) for c in CASES], ids=[c[0] for c in CASES])
def test_renders(module_page: Any, text: str, html: str) -> None:
    assert module_page.evaluate(RENDER, [text]) == [html]


def test_hostile_input_renders_only_allowed_elements(module_page: Any) -> None:
    # Every case returns (a renderer that hangs fails on the test's timeout).
    assert module_page.evaluate(AUDIT, HOSTILE) == []
    assert module_page.evaluate(AUDIT, [case[1] for case in CASES]) == []


def test_every_prefix_of_a_streamed_answer_renders(module_page: Any) -> None:
    """A message is redrawn as it streams: each prefix renders, and none links to an unsafe
    URL (a javascript: link cut before its parenthesis closes stays text)."""
    prefixes = [ANSWER[:n] for n in range(len(ANSWER) + 1)]
    assert module_page.evaluate(AUDIT, prefixes) == []
    final = module_page.evaluate(RENDER, [ANSWER])[0]
    assert final.count("<a ") == 1
    assert 'href="https://example.com/parser"' in final
    assert "[that](javascript:alert(1))" in final
    for tag in (
        "<h3",
        "<ol>",
        "<ul>",
        "<table>",
        'data-language="python"',
        "<blockquote>",
        "<del>",
    ):
        assert tag in final, tag


PLAIN = """
async (cases) => {
  const { plainText } = await import('/static/markdown.js');
  return cases.map((text) => plainText(text));
}
"""

# Cases of their own: table rows alike in shape only.
PLAIN_CASES: list[tuple[str, str, str]] = [
    (
        "the demo answer's last lines",
        "| edit | applied |\n| model | `demo-fast` |\n"
        "- Everything here is simulated by the demo agent: no file was touched.\n"
        "- Learn more about the protocol at "
        "[agentclientprotocol.com](https://agentclientprotocol.com).",
        "edit · applied\nmodel · demo-fast\n"
        "• Everything here is simulated by the demo agent: no file was touched.\n"
        "• Learn more about the protocol at agentclientprotocol.com.",
    ),
    ("table head and separator", "| a | b |\n|---|:-:|\n| 1 | 2 |", "a · b\n1 · 2"),
    ("heading", "## The *new* function ##", "The new function"),
    ("emphasis and code", "**bold**, _em_, ~~gone~~ and `x | y`", "bold, em, gone and x | y"),
    ("fence lines go, code stays", "```python\ndef f():\n```", "def f():"),
    ("ordered list and quote", "1. first\n> > quoted **twice**", "1. first\nquoted twice"),
    ("rule", "above\n---\nbelow", "above\nbelow"),
    (
        "image and autolink",
        "![a cat](https://e.com/c.png) <https://e.com>",
        "image: a cat (e.com) https://e.com",
    ),
    (
        "a link's host stays beside its text",
        "see [the docs](https://evil.example/x)",
        "see the docs (evil.example)",
    ),
    ("an unsafe link stays literal", "[x](javascript:alert(1))", "[x](javascript:alert(1))"),
    ("escapes", r"\*not emphasis\*", "*not emphasis*"),
    ("a tail cut inside markup", "ing** and [half](https://e", "ing** and [half](https://e"),
]


@pytest.mark.parametrize(
    ("text", "plain"), [c[1:] for c in PLAIN_CASES], ids=[c[0] for c in PLAIN_CASES]
)
def test_plain_text(module_page: Any, text: str, plain: str) -> None:
    assert module_page.evaluate(PLAIN, [text]) == [plain]
