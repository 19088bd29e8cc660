/* host.h - the table of core services handed to plugins. */
#ifndef LOOM_HOST_H
#define LOOM_HOST_H

#include "loom/plugin_api.h"

const loom_host *loom_host_table(void);

#endif
