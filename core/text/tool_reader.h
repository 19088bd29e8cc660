/* tool_reader.h - the tool calls in a reply's content, read as they come
 * (tool_reader.c): the content with each call's text taken out, and the
 * calls, their arguments' text growing step by step. */
#ifndef LOOM_TOOL_READER_H
#define LOOM_TOOL_READER_H

#include "loom.h"
#include "text/chat_json.h"
#include "text/json_text.h"

typedef struct loom_tool_reader loom_tool_reader;

/* opened: the reply begins inside a call (the prompt ended with the
 * format's opening marker). */
loom_status loom_tool_reader_create(const loom_model *model, loom_tool_style style, bool opened,
				    loom_tool_reader **out);
void loom_tool_reader_free(loom_tool_reader *tr);

/* The reply's content text, in order; what is content goes to out. */
loom_status loom_tool_reader_text(loom_tool_reader *tr, const char *text, size_t n, loom_strbuf *out);
/* Whether token is a marker of the format where the reply is now (an
 * opening outside a call, a closing inside one); a marker is read as one,
 * with no text of its own, by loom_tool_reader_marker. */
bool loom_tool_reader_is_marker(const loom_tool_reader *tr, loom_token token);
void loom_tool_reader_marker(loom_tool_reader *tr, loom_token token, loom_strbuf *out);
/* The reply has ended: what was held back goes to out. */
loom_status loom_tool_reader_finish(loom_tool_reader *tr, loom_strbuf *out);

/* Formats whose calls are messages of their own (harmony): a call to
 * name begins, its text is the arguments, then it ends. */
void loom_tool_reader_begin_call(loom_tool_reader *tr, const char *name, size_t n);
void loom_tool_reader_call_text(loom_tool_reader *tr, const char *text, size_t n);
void loom_tool_reader_end_call(loom_tool_reader *tr);

size_t loom_tool_reader_calls(loom_tool_reader *tr, const loom_tool_call **calls);
/* Inside a call whose text is not whole yet. */
bool loom_tool_reader_in_call(const loom_tool_reader *tr);

#endif
