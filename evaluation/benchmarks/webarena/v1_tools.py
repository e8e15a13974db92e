"""The browser tools a V1 agent gets on WebArena: openhands-tools' own, plus the ones tasks need.

openhands-tools' browser tool set (navigate, click, type, get_state, get_content, scroll, go_back,
tabs, storage) cannot choose an ``<option>`` of a ``<select>`` or press a key, and WebArena's
official tasks need both: among the 812 configs, forms with drop-downs (Magento admin filters and
report periods, GitLab's visibility and role menus, the shop's sort order) and search boxes that
submit on Enter; WebArena's own action space has ``select_option``, ``press`` and ``focus``. Two tools
are added through the SDK's public tool API (``ToolDefinition`` + ``register_tool``), so a real
model sees them like the stock ones:

- ``browser_select_option(index, option)``: choose the option with that visible text (or value) in
  the drop-down at ``index`` (browser-use's ``SelectDropdownOptionEvent``: native ``<select>`` and
  ARIA menus);
- ``browser_press_key(keys, index=None)``: press a key or shortcut (``Enter``, ``Tab``,
  ``Control+a``), first focusing the element at ``index`` when given (browser-use's
  ``SendKeysEvent``).

All the tools share one executor per conversation (each task has its own browser): the stock
``BrowserToolSet`` keeps one executor per process and ignores the config of later ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Self

from openhands.sdk.tool import ToolAnnotations, ToolDefinition, register_tool
from openhands.tools.browser_use import definition
from openhands.tools.browser_use.definition import BrowserAction, BrowserObservation
from openhands.tools.browser_use.impl import BrowserToolExecutor
from pydantic import Field

if TYPE_CHECKING:
    from openhands.sdk.conversation.state import ConversationState

__all__ = [
    "ADDED_TOOLS",
    "BROWSER_TOOLS",
    "TOOL_SET",
    "BrowserPressKeyAction",
    "BrowserSelectOptionAction",
    "WebArenaBrowserExecutor",
    "WebArenaBrowserToolSet",
]

TOOL_SET = "webarena_browser_tool_set"
STOCK_TOOLS: tuple[type[ToolDefinition[Any, Any]], ...] = (
    definition.BrowserNavigateTool,
    definition.BrowserClickTool,
    definition.BrowserGetStateTool,
    definition.BrowserGetContentTool,
    definition.BrowserTypeTool,
    definition.BrowserScrollTool,
    definition.BrowserGoBackTool,
    definition.BrowserListTabsTool,
    definition.BrowserSwitchTabTool,
    definition.BrowserCloseTabTool,
    definition.BrowserGetStorageTool,
    definition.BrowserSetStorageTool,
)
"""openhands-tools' browser tools, less rrweb recording (its script comes from a CDN)."""

GUIDANCE = """<BROWSER_TOOLS>
You operate web sites in a browser to complete a task.
* Call `browser_get_state` before `browser_click`, `browser_type`, `browser_select_option` or
  `browser_press_key` with an index: indices change after every action.
* Drop-downs: `browser_select_option(index, option)` with the option's visible text.
* Keys: `browser_press_key(keys)`, e.g. "Enter" to submit a search box you typed into.
* When the task asks for information, end with `finish` whose message is only the answer.
</BROWSER_TOOLS>"""


class BrowserSelectOptionAction(BrowserAction):
    """Choose an option of a drop-down."""

    index: int = Field(ge=0, description="The index of the drop-down element (from browser_get_state)")
    option: str = Field(description="The visible text (or the value) of the option to choose")


class BrowserPressKeyAction(BrowserAction):
    """Press a key or a shortcut, on the focused element or on the one at ``index``."""

    keys: str = Field(description='The key or shortcut, e.g. "Enter", "Tab", "Escape", "Control+a"')
    index: int | None = Field(
        default=None,
        ge=0,
        description="Focus this element (from browser_get_state) before pressing; default: the focused one",
    )


class BrowserSelectOptionTool(ToolDefinition[BrowserSelectOptionAction, BrowserObservation]):
    """``browser_select_option``."""

    @classmethod
    def create(cls, executor: WebArenaBrowserExecutor) -> Sequence[Self]:
        return [
            cls(
                description=(
                    "Choose an option in a drop-down (<select> or menu) by its visible text.\n\n"
                    "Parameters:\n- index: the drop-down's index (from browser_get_state)\n"
                    "- option: the option's visible text, or its value"
                ),
                action_type=BrowserSelectOptionAction,
                observation_type=BrowserObservation,
                annotations=ToolAnnotations(
                    title="browser_select_option",
                    readOnlyHint=False,
                    destructiveHint=False,
                    idempotentHint=True,
                    openWorldHint=True,
                ),
                executor=executor,
            )
        ]


class BrowserPressKeyTool(ToolDefinition[BrowserPressKeyAction, BrowserObservation]):
    """``browser_press_key``."""

    @classmethod
    def create(cls, executor: WebArenaBrowserExecutor) -> Sequence[Self]:
        return [
            cls(
                description=(
                    "Press a key or a key combination in the page, e.g. Enter to submit a search box.\n\n"
                    'Parameters:\n- keys: e.g. "Enter", "Tab", "Escape", "ArrowDown", "Control+a"\n'
                    "- index: optional; focus this element (from browser_get_state) first"
                ),
                action_type=BrowserPressKeyAction,
                observation_type=BrowserObservation,
                annotations=ToolAnnotations(
                    title="browser_press_key",
                    readOnlyHint=False,
                    destructiveHint=False,
                    idempotentHint=False,
                    openWorldHint=True,
                ),
                executor=executor,
            )
        ]


ADDED_TOOLS = (BrowserSelectOptionTool, BrowserPressKeyTool)
BROWSER_TOOLS = frozenset(tool.name for tool in (*STOCK_TOOLS, *ADDED_TOOLS))
"""Tools whose observation follows a browser action: a captured step after each."""


class WebArenaBrowserExecutor(BrowserToolExecutor):
    """openhands-tools' executor, also running the added actions on the same browser-use session.

    The added actions run where the stock ones do (the executor's event loop, with its timeout and
    crash accounting); everything else is the stock executor's.
    """

    async def _execute_action(self, action: Any) -> Any:
        if not isinstance(action, BrowserSelectOptionAction | BrowserPressKeyAction):
            return await super()._execute_action(action)
        try:
            await self._ensure_initialized()
            session = self._server.browser_session
            if session is None:
                text, error = "Error: No browser session active", True
            elif isinstance(action, BrowserSelectOptionAction):
                text, error = await _select_option(session, action.index, action.option)
            else:
                text, error = await _press_key(session, action.keys, action.index)
        except Exception as exc:  # the agent reads the error and goes on, as with the stock tools
            text, error = f"Error: {type(exc).__name__}: {exc}", True
        return BrowserObservation.from_text(
            text=text, is_error=error, full_output_save_dir=self.full_output_save_dir
        )


async def _select_option(session: Any, index: int, option: str) -> tuple[str, bool]:
    from browser_use.browser.events import SelectDropdownOptionEvent

    node = await session.get_dom_element_by_index(index)
    if node is None:
        return f"Element with index {index} not found", True
    event = session.event_bus.dispatch(SelectDropdownOptionEvent(node=node, text=option))
    await event
    result = await event.event_result(raise_if_any=True, raise_if_none=False)
    if isinstance(result, dict) and result.get("success") in (False, "false"):
        return f"Could not select {option!r}: {result.get('message') or result}", True
    return f"Selected {option!r} in element {index}", False


async def _press_key(session: Any, keys: str, index: int | None) -> tuple[str, bool]:
    from browser_use.browser.events import SendKeysEvent

    if index is not None:
        node = await session.get_dom_element_by_index(index)
        if node is None:
            return f"Element with index {index} not found", True
        cdp = await session.get_or_create_cdp_session()
        await cdp.cdp_client.send.DOM.focus(
            params={"backendNodeId": node.backend_node_id}, session_id=cdp.session_id
        )
    event = session.event_bus.dispatch(SendKeysEvent(keys=keys))
    await event
    await event.event_result(raise_if_any=True, raise_if_none=False)
    return f"Pressed {keys}" + (f" in element {index}" if index is not None else ""), False


class WebArenaBrowserToolSet(ToolDefinition[BrowserAction, BrowserObservation]):
    """The browser tools of one conversation: the stock ones and the added ones on one executor."""

    executors: ClassVar[dict[str, list[WebArenaBrowserExecutor]]] = {}
    """The executors made, by ``cdp_url`` (one browser per worker), so the harness closes each
    conversation's at its end."""

    @classmethod
    def create(  # type: ignore[override]
        cls, conv_state: ConversationState, **config: Any
    ) -> list[ToolDefinition[Any, Any]]:
        executor = WebArenaBrowserExecutor(
            full_output_save_dir=conv_state.env_observation_persistence_dir, **config
        )
        cls.executors.setdefault(str(config.get("cdp_url")), []).append(executor)
        tools: list[ToolDefinition[Any, Any]] = []
        for tool in (*STOCK_TOOLS, *ADDED_TOOLS):
            tools.extend(tool.create(executor))  # type: ignore[arg-type]
        return [tool.model_copy(update={"prompt_guidance": GUIDANCE}) for tool in tools]


def register() -> None:
    """Make ``Tool(name=TOOL_SET, params=...)`` resolve to ``WebArenaBrowserToolSet`` (idempotent)."""
    from openhands.sdk.tool.registry import list_registered_tools

    if TOOL_SET not in list_registered_tools():
        register_tool(TOOL_SET, WebArenaBrowserToolSet)
