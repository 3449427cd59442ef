"""The capture rules for user prompts: which prompt of a coding agent's session corrects
the agent in a way worth a person's review (docs/agents.md, "Capture"). Pure functions,
no I/O, split from memoryhub_client.capture (the failure rules, the Learning the hooks
send, RULES_VERSION for both) when rules v5 made one module too long; the hooks call
correction_learning on each prompt, the transcript path on each prompt of a transcript.

A user prompt is a correction when (slash commands, tool results and the client's own
`<tags>` are never prompts; a leading "hmm", "wait", "ok", "yes", "well"... is skipped,
in the prompt and in each sentence, v3)
- it opens with a negation: "no, …", "nope", "wrong", "that's not right", "not quite",
  "actually, …", "that's not how …" (v3), "not in …" (v4) (but not "no thanks", "no
  worries", "no problem", "no need", "no rush", "no, that's all", nor "actually" followed
  by a change to the task: "actually, make it orange", v4), with at least
  MIN_CORRECTION_WORDS words after it (4 since v4: "no, just the backend" answers a
  question); or
- a sentence of it states a rule: opens with "never", "always", "don't"/"do not"/"please
  don't" (but not "don't worry/forget/bother"), "stop …ing", or says "use … instead" (v2:
  "instead" alone was any change request), "we use X, not Y" (v2: up to 80 characters
  between), "use X, not Y" (v3), "we only/always/never use", "we don't/never/always …"
  (v3, not "we don't need/have to/want", v4), "we … in this repo/codebase/project" (v4),
  ", never …" (v2), "I told you", "I said" — and is not a question nor "never mind" (v3),
  and has at least MIN_CORRECTION_WORDS words ("don't push it" is about the task, v4);
  or such a sentence states the team's practice with no rule word (v5): where a kind of
  thing goes, lives or comes from ("Versions go in libs.versions.toml", "Credentials only
  ever come from the environment"), who may do it or where it holds ("nobody", "no one",
  "only ever", "everywhere"), what "we" do as a habit ("We log with zerolog…", not "we
  need/should/will/had…"), what holds "in/on this repo, monorepo, codebase, project,
  team"; a leading "stop." opens a correction as a negation does ("Whoa, stop. Nobody
  applies…", v5);
- and in either case it is not limited to the task at hand (v2): "for now", "this time",
  "today", "in this change/PR/branch/commit", "for this task", "just this once"; "yet",
  "until I/we/you", "right now", "at/for the moment", "for/in this ticket/issue/story/
  release" (v4); "until … lands/merges/is done", someone "is rewriting/reworking/working
  on" it: a wait on someone else's work (v5);
- and, in a transcript, a prompt that answers the question the agent's text just asked
  ("Shall I squash them?" "No, keep them separate…") is a correction only when a sentence
  of it states a rule: a "no" there is an answer (v5).
The learning reads "the user corrected the agent: "…"" with the prompt's first
MAX_QUOTE_CHARS characters.

Every pattern runs on a bounded text (MAX_SCAN_CHARS) and has no nested repetition.
"""

from __future__ import annotations

import re
from typing import Any

from memoryhub_client.capture import CORRECTION, MAX_SCAN_CHARS, Learning, fingerprint_of, normalise, shorten

MAX_QUOTE_CHARS = 300
MIN_CORRECTION_WORDS = 4

_INTERJECTION = re.compile(
    r"(?i)^(?:hm+|wait|ok(?:ay)?|yes|yeah|yep|well|oh|ah|so|sorry|uh+|um+|erm?|whoa|woah|hey)\b[\s,.!:;-]+"
)
_NEGATION_OPENER = re.compile(
    r"(?i)^(?:no\b|nope\b|wrong\b|incorrect\b|not quite\b|not like that\b|not that\b|actually\b"
    r"|that'?s (?:not right|not what|not how|wrong|incorrect)|that is (?:not right|not how|wrong|incorrect)"
    r"|this (?:isn'?t|is not) (?:how|right|what)|we don'?t do (?:it|that|things) that way"
    r"|you'?re wrong|this is wrong|not in\b|stop[.!])[\s,.!:;-]*"
)
# After "actually", a change of mind about the task ("actually, make it orange") (v4).
_TASK_VERB = re.compile(
    r"(?i)^(?:just\s+|please\s+|let'?s\s+)?(?:make|change|do|try|put|add|remove|delete|rename|move|set|show|switch"
    r"|undo|revert|go|call|use the other|skip|can you|could you)\b"
)
_NOT_A_CORRECTION_OPENER = re.compile(
    r"(?i)^no\b[\s,.!-]*(?:worries|problem|thanks|thank|rush|need|that'?s (?:all|it|everything|fine)"
    r"|all good|nothing else|more)\b|^actually,? (?:yes|that'?s (?:great|good|fine|perfect))\b"
    r"|^(?:never ?mind|forget it|leave it)\b"
)
_RULE_SENTENCE = re.compile(
    r"(?i)^(?:please\s+|and\s+|also\s+|but\s+)?(?:never\b|always\b|don'?t\b|do not\b|stop \w+ing\b)"
    r"|\buse\b[^.!?]{0,80}\binstead\b|\binstead of\b[^.!?]{0,80}\buse\b"
    r"|\bwe use\b[^.!?]{0,80}\bnot\b|\bwe (?:only|always|never) use\b|,\s*never\b"
    r"|^use\b[^.!?]{0,60},\s*not\b|\bwe (?:don'?t|do not|never|always)\s+(?!need\b|have to\b|want\b)\w+"
    r"|\bwe (?!(?:need|should|could|can|might|want|will|would|must|have|had)\b)\w+[^.!?]{0,60}"
    r"\bin this (?:repo|repository|codebase|project|team)\b"
    r"|\bi (?:told|asked) you\b|\bi said\b"
)
_ONE_OFF = re.compile(
    r"(?i)\bfor now\b|\bthis time\b|\btoday\b|\bin this (?:change|pr|pull request|branch|commit)\b"
    r"|\bfor this task\b|\bjust this once\b"
    r"|\byet\b|\buntil (?:i|we|you)\b|\bright now\b|\b(?:at|for) the moment\b"
    r"|\b(?:for|in) this (?:ticket|issue|story|one|release|sprint)\b"
)
# v5: a sentence that states the team's practice with no rule word: where a kind of thing
# goes or comes from ("Versions go in libs.versions.toml", "Credentials only ever come from
# the environment"), who may do it ("Nobody applies from their own machine"), what holds
# everywhere, what "we" do as a habit ("We log with zerolog everywhere"), or what holds in
# this repo or team ("on this monorepo").
_PLACEMENT = re.compile(r"(?i)\b(?:goes|go|lives|live|belongs|belong|comes|come)\s+(?:in|into|under|from)\b")
_UNIVERSAL = re.compile(r"(?i)\b(?:nobody|no one|only ever|everywhere)\b")
_WE_PRACTICE = re.compile(
    r"(?i)^(?:and\s+|but\s+|here\s+)?we (?!(?:need|should|could|can|might|want|will|would|must|have|had|were"
    r"|was|are|just|also|still|did|do|got|may|shall|saw|tried|talked|agreed|think|thought|hope|said)\b)"
    r"[a-z]{2,20}\b(?!')"
)
_PROJECT_SCOPE = re.compile(
    r"(?i)\b(?:in|on|for|across) (?:this|our)"
    r" (?:repo|repository|monorepo|codebase|project|team|org|company)\b"
)
_PRACTICE_CUES = (_PLACEMENT, _UNIVERSAL, _WE_PRACTICE, _PROJECT_SCOPE)
# v5: a wait on someone else's work ("until Marco's MR lands", "he's rewriting the
# pipeline"): the instruction holds until then, not for good.
_TEMPORARY = re.compile(
    r"(?i)\buntil\b[^.!?]{0,60}\b(?:lands|merges|is merged|is in|is done|is back|ships|is released"
    r"|goes out)\b|\b(?:is|are|'s|'re) (?:currently |still )?(?:working on|writing|rewriting|reworking"
    r"|redoing|refactoring|being (?:re)?written|being reworked)\b"
)
_NOT_A_RULE = re.compile(
    r"(?i)^(?:please\s+)?(?:don'?t|do not) (?:worry|forget|bother|mind)\b|^never ?mind\b"
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def correction_learning(
    prompt: Any, *, source: str = "", answers_a_question: bool = False
) -> Learning | None:
    """The learning of one user prompt (Claude Code's UserPromptSubmit), or None. A prompt
    that `answers_a_question` the agent just asked (known in a transcript) is a correction
    only when it states a rule: "No, keep them separate" answers "Shall I squash?" (v5)."""
    if not isinstance(prompt, str):
        return None
    text = prompt.strip()[:MAX_SCAN_CHARS]
    if not text or text[0] in "</!" or text.startswith("[Request interrupted"):
        return None
    if not _is_correction(text, answers_a_question=answers_a_question):
        return None
    quote = shorten(" ".join(text.replace('"', "'").split()), MAX_QUOTE_CHARS)
    return Learning(
        CORRECTION,
        f'the user corrected the agent: "{quote}"',
        source,
        fingerprint_of(CORRECTION, normalise(quote)),
    )


def _is_correction(text: str, *, answers_a_question: bool = False) -> bool:
    text = _without_interjection(text)
    if _NOT_A_CORRECTION_OPENER.match(text) or _ONE_OFF.search(text) or _TEMPORARY.search(text):
        return False
    opener = _NEGATION_OPENER.match(text)
    if opener is not None and not answers_a_question:
        rest = text[opener.end() :]
        if opener.group(0).lower().startswith("actually") and _TASK_VERB.match(rest):
            return False
        return len(rest.split()) >= MIN_CORRECTION_WORDS and not _only_a_question(rest)
    for sentence in _SENTENCE_END.split(text):
        sentence = _without_interjection(sentence.strip())
        if not sentence or sentence.endswith("?") or _NOT_A_RULE.match(sentence):
            continue
        if len(sentence.split()) < MIN_CORRECTION_WORDS:
            continue
        if _RULE_SENTENCE.search(sentence) or any(cue.search(sentence) for cue in _PRACTICE_CUES):
            return True
    return False


def _without_interjection(text: str) -> str:
    opener = _INTERJECTION.match(text)
    return text[opener.end() :] if opener is not None else text


def _only_a_question(text: str) -> bool:
    sentences = [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]
    return bool(sentences) and all(s.endswith("?") for s in sentences)
