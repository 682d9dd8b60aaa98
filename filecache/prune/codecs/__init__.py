"""Message codecs: provider message lists ⇄ the neutral transcript pruning works on.

``base`` holds the transcript, the invariants every codec keeps and the registry
(``register_format``); ``openai_chat``, ``openai_responses``, ``anthropic_messages`` and
``gemini_contents`` are the built-in formats; ``langchain_messages`` and
``pydantic_ai_messages`` convert those frameworks' message objects to OpenAI chat dicts and put
pruned texts back (``filecache.prune.sdk_messages`` loads them when such objects are present).
Nothing here imports ``filecache.adapters``.
"""
