/* The single definition of stb_ds's functions for the whole program. */
#define STB_DS_IMPLEMENTATION
#define STBDS_NO_SHORT_NAMES
#include "stb_ds.h"
