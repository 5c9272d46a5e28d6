# TPT-RAID additions to tgt's usr/Makefile (included by patch 0001).
# TPT_TOP, TPT_LIBDIR and TPT_VERSION come from the fork's top-level Makefile.

TPT_VERSION ?= 0.0.0
EXTRAVERSION := +tpt$(TPT_VERSION)
