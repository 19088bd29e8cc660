/* st_plugin.h - names more than one file of the plugin spells. */
#ifndef LOOM_ST_PLUGIN_H
#define LOOM_ST_PLUGIN_H

/* The plugin's name, as its descriptor gives it and its log lines say. */
#define PLUGIN "safetensors"

/* "▁", the SentencePiece meta symbol that stands for a space. */
#define SPM_SPACE "\xe2\x96\x81"

#endif
