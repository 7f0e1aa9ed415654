"""Accessibility checks the browser tests share: axe-core's rules (through axe-playwright-python,
which ships axe-core and injects it into the page: nothing is fetched) and a keyboard walk that
presses Tab until every control of the page has had the focus."""

from __future__ import annotations

from axe_playwright_python.sync_playwright import Axe

# Violations at these impacts fail a page; axe's "moderate" and "minor" ones are reported by the
# failure message only when a blocking one is there too.
BLOCKING_IMPACTS = ("serious", "critical")

_AXE = Axe()

# Every control a keyboard user must be able to reach, each tagged with a key (radios of one
# group share one: a group is one Tab stop), and a listener that records the key of every element
# that takes the focus. Hidden controls (the `hidden` attribute, closed <details> and dialogs,
# display: none) are left out: nobody can reach them with a mouse either.
_TAG_STOPS = """() => {
  const selector = 'a[href], button, input:not([type=hidden]), select, textarea, summary, [tabindex]';
  const stops = new Map();
  let next = 0;
  for (const element of document.querySelectorAll(selector)) {
    if (element.disabled || element.getAttribute('tabindex') === '-1' || element.closest('[inert]')) continue;
    const closedDetails = element.closest('details:not([open])');
    if (closedDetails && element !== closedDetails.querySelector('summary')) continue;
    if (!element.checkVisibility()) continue;
    const key = element.type === 'radio' ? `radio:${element.form?.id || ''}:${element.name}` : `stop:${next++}`;
    element.dataset.a11yStop = key;
    const name = element.getAttribute('aria-label') || element.textContent || element.name || element.tagName;
    stops.set(key, name.trim().slice(0, 60));
  }
  window.__focused = [];
  document.addEventListener('focusin', (event) => {
    const stop = event.target.closest?.('[data-a11y-stop]');
    window.__focused.push(stop ? stop.dataset.a11yStop : `other:${event.target.tagName}`);
  });
  return Object.fromEntries(stops);
}"""


def blocking_violations(page, context: str | None = None) -> list[str]:
    """axe-core's serious and critical violations on the page as it is now, one line each:
    rule, impact and the elements it names (empty when there are none)."""
    violations = _AXE.run(page, context=context).response["violations"]
    return [
        f"{violation['id']} ({violation['impact']}): {violation['help']} — "
        + "; ".join(" ".join(node["target"]) for node in violation["nodes"][:5])
        for violation in violations
        if violation["impact"] in BLOCKING_IMPACTS
    ]


def unreachable_by_tab(page, extra_presses: int = 6) -> dict[str, str]:
    """Press Tab from the top of the page as many times as it has controls (and a few more) and
    return the controls that never took the focus ({key: its text}); empty when the keyboard
    reaches everything, which a focus trap anywhere would prevent."""
    stops = page.evaluate(_TAG_STOPS)
    page.evaluate("() => { document.activeElement?.blur(); window.scrollTo(0, 0); }")
    for _ in range(len(stops) + extra_presses):
        page.keyboard.press("Tab")
    focused = set(page.evaluate("() => window.__focused"))
    return {key: label for key, label in stops.items() if key not in focused}


def focused_text(page) -> str:
    """What the focused element says (its accessible text, roughly): to follow a Tab walk."""
    return page.evaluate(
        "() => { const e = document.activeElement; return e ? "
        "(e.getAttribute('aria-label') || e.textContent || e.value || e.name || e.tagName).trim() : ''; }"
    )


def tab_to(page, predicate: str, limit: int = 80, backwards: bool = False) -> int:
    """Press Tab (Shift+Tab backwards) until `predicate` (a JS expression over the focused
    element `e`) holds; the number of presses. Fails when `limit` presses do not get there."""
    check = f"() => {{ const e = document.activeElement; return Boolean(e && ({predicate})); }}"
    for presses in range(1, limit + 1):
        page.keyboard.press("Shift+Tab" if backwards else "Tab")
        if page.evaluate(check):
            return presses
    raise AssertionError(f"{limit} presses of Tab never reached {predicate}; the focus is on {focused_text(page)!r}")
