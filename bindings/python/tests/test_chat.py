"""Chat: messages formatted with a chat template, and the reply generated
from them as generate() would from the formatted text."""

from __future__ import annotations

import loom

MESSAGES = [{"role": "system", "content": "You tell stories."}, {"role": "user", "content": "Tell me one."}]


def test_templates_format_messages(stories):
    assert stories.chat_template == "plain"
    chatml = stories.apply_chat_template(MESSAGES, template="chatml")
    assert chatml == ("<|im_start|>system\nYou tell stories.<|im_end|>\n"
                      "<|im_start|>user\nTell me one.<|im_end|>\n<|im_start|>assistant\n")
    assert not stories.apply_chat_template(MESSAGES, template="chatml", add_assistant=False).endswith("assistant\n")
    with_own = stories.apply_chat_template(MESSAGES)
    assert "Tell me one." in with_own


def test_reasoning_is_what_the_template_offers(stories):
    harmony = stories.apply_chat_template(MESSAGES, template="harmony", reasoning="high")
    assert "Reasoning: high\n" in harmony
    assert harmony.replace("Reasoning: high", "Reasoning: medium") == stories.apply_chat_template(
        MESSAGES, template="harmony")
    assert stories.apply_chat_template(MESSAGES, template="chatml", reasoning="none") == stories.apply_chat_template(
        MESSAGES, template="chatml")
    for template, reasoning in (("harmony", "none"), ("chatml", "high")):
        try:
            stories.apply_chat_template(MESSAGES, template=template, reasoning=reasoning)
        except loom.LoomError as e:
            assert e.status == loom.Status.INVALID_ARGUMENT and "reasoning" in str(e)
        else:
            raise AssertionError(f"{template} took reasoning {reasoning}")
    try:
        stories.apply_chat_template(MESSAGES, reasoning="lots")
    except ValueError as e:
        assert "lots" in str(e)
    else:
        raise AssertionError("reasoning 'lots' was taken")


def test_chat_is_generation_from_the_formatted_text(stories):
    with stories.context(n_ctx=256) as ctx:
        reply = list(ctx.chat(MESSAGES, max_tokens=16, sampling=loom.GREEDY))
        text = stories.apply_chat_template(MESSAGES)
        plain = list(ctx.generate(text, max_tokens=16, sampling=loom.GREEDY, parse_special=True))
    assert [s.token for s in reply] == [s.token for s in plain] and len(reply) > 0
    assert "".join(s.text for s in reply) == "".join(s.text for s in plain)
    assert all(s.reasoning == "" for s in reply)
