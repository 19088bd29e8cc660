/* layout_export.h - a loaded model written back in its backend's own
 * layouts (`loom convert --layout`), so that the next load uses the file in
 * place instead of repacking it. */
#ifndef LOOM_LAYOUT_EXPORT_H
#define LOOM_LAYOUT_EXPORT_H

#include "model/model.h"

/* Writes m's file again, in its own format, with every weight the backend
 * repacked in the repacked bytes, and the keys of model/place.h naming the
 * backend and each tensor's layout. m is loaded with weights, used in place
 * from its opened file. */
loom_status loom_layout_export(loom_model *m, const char *out_path);

#endif
