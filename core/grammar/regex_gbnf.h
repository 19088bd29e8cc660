/* regex_gbnf.h - a JSON Schema pattern as GBNF for a JSON string's body. */
#ifndef LOOM_REGEX_GBNF_H
#define LOOM_REGEX_GBNF_H

/* The GBNF (malloc'd) of the JSON string bodies whose values pattern
 * matches; any_char names the rule of one character of a string body, for
 * an unanchored pattern's ends. NULL with *why (malloc'd) saying what
 * cannot be read. */
char *loom_regex_gbnf(const char *pattern, const char *any_char, char **why);

#endif
