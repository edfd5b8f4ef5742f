# make install / make uninstall (included by the Makefile), after zstd's and
# libuv's: the public headers (include/), libattn.a, libattn.so.X.Y.Z with its
# SONAME link libattn.so.X and the link libattn.so, attn.pc for pkg-config,
# attnConfig.cmake for CMake's find_package(attn), the attn tool and its man
# page attn(1) (tools/gen_man.sh, from the tool's help texts). make uninstall
# removes exactly these files (and include/attn/, lib/cmake/attn/ when they
# are left empty).
#   make install PREFIX=/usr/local DESTDIR=/tmp/stage
#   make install PREFIX=/usr LIBDIR=/usr/lib/x86_64-linux-gnu
# A cross build writes the man page by running its tool under RUNNER, e.g.
#   make install CC=aarch64-linux-gnu-gcc BUILD=build-arm64 RUNNER="qemu-aarch64 -L /usr/aarch64-linux-gnu"

PREFIX ?= /usr/local
prefix ?= $(PREFIX)
exec_prefix ?= $(prefix)
BINDIR ?= $(exec_prefix)/bin
LIBDIR ?= $(exec_prefix)/lib
INCLUDEDIR ?= $(prefix)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
MANDIR ?= $(prefix)/share/man
MAN1DIR ?= $(MANDIR)/man1
CMAKEDIR ?= $(LIBDIR)/cmake/attn
INSTALL ?= install
INSTALL_PROGRAM ?= $(INSTALL) -m 755
INSTALL_DATA ?= $(INSTALL) -m 644

PUBLIC_HEADERS := $(wildcard include/attn/*.h)
# what a program linked with libattn.a needs besides it (attn.pc's Libs.private)
LIBS_PRIVATE := -fopenmp $(LDLIBS)
# $(call pc_dir,DIR,BASE,NAME): DIR as ${NAME} or ${NAME}/... where it is BASE
# or under it (BASE's value is NAME), so that attn.pc stays relocatable
pc_dir = $(if $(filter $(2),$(1)),$${$(3)},$(patsubst $(2)/%,$${$(3)}/%,$(1)))
# $(call install_in,TEMPLATE,SED-ARGS,FILE): mk/TEMPLATE.in filled in as FILE
install_in = sed -e 's|@VERSION@|$(VERSION)|g' -e 's|@VERSION_MAJOR@|$(VERSION_MAJOR)|g' \
  -e 's|@SOVERSION@|$(SOVERSION)|g' \
  -e 's|@SHLIB@|$(SHLIB)|g' -e 's|@SONAME@|$(SONAME)|g' $(2) mk/$(1).in > '$(3)' && chmod 644 '$(3)'
empty :=
space := $(empty) $(empty)

.PHONY: install uninstall
install: $(BUILD)/libattn.a $(BUILD)/libattn.so $(BUILD)/attn $(BUILD)/attn.1
	$(INSTALL) -d '$(DESTDIR)$(INCLUDEDIR)/attn' '$(DESTDIR)$(LIBDIR)' '$(DESTDIR)$(PKGCONFIGDIR)' \
	  '$(DESTDIR)$(CMAKEDIR)' '$(DESTDIR)$(BINDIR)' '$(DESTDIR)$(MAN1DIR)'
	$(INSTALL_DATA) include/attn.h '$(DESTDIR)$(INCLUDEDIR)/attn.h'
	$(INSTALL_DATA) $(PUBLIC_HEADERS) '$(DESTDIR)$(INCLUDEDIR)/attn/'
	$(INSTALL_DATA) $(BUILD)/libattn.a '$(DESTDIR)$(LIBDIR)/libattn.a'
	$(INSTALL_DATA) $(BUILD)/$(SHLIB) '$(DESTDIR)$(LIBDIR)/$(SHLIB)'
	ln -sf $(SHLIB) '$(DESTDIR)$(LIBDIR)/$(SONAME)'
	ln -sf $(SONAME) '$(DESTDIR)$(LIBDIR)/libattn.so'
	$(call install_in,attn.pc,-e 's|@prefix@|$(prefix)|' \
	  -e 's|@exec_prefix@|$(call pc_dir,$(exec_prefix),$(prefix),prefix)|' \
	  -e 's|@libdir@|$(call pc_dir,$(LIBDIR),$(exec_prefix),exec_prefix)|' \
	  -e 's|@includedir@|$(call pc_dir,$(INCLUDEDIR),$(prefix),prefix)|' \
	  -e 's|@LIBS_PRIVATE@|$(LIBS_PRIVATE)|',$(DESTDIR)$(PKGCONFIGDIR)/attn.pc)
	$(foreach f,attnConfig.cmake attnConfigVersion.cmake,$(call install_in,$(f), \
	  -e 's|@LIBDIR@|$(LIBDIR)|g' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' \
	  -e 's|@LIBS_PRIVATE@|$(subst $(space),;,$(LIBS_PRIVATE))|',$(DESTDIR)$(CMAKEDIR)/$(f)) &&) true
	$(INSTALL_PROGRAM) $(BUILD)/attn '$(DESTDIR)$(BINDIR)/attn'
	$(INSTALL_DATA) $(BUILD)/attn.1 '$(DESTDIR)$(MAN1DIR)/attn.1'

uninstall:
	rm -f '$(DESTDIR)$(INCLUDEDIR)/attn.h' \
	  $(foreach h,$(PUBLIC_HEADERS),'$(DESTDIR)$(INCLUDEDIR)/attn/$(notdir $(h))')
	rmdir '$(DESTDIR)$(INCLUDEDIR)/attn' 2>/dev/null || true
	rm -f '$(DESTDIR)$(LIBDIR)/libattn.a' '$(DESTDIR)$(LIBDIR)/$(SHLIB)' \
	  '$(DESTDIR)$(LIBDIR)/$(SONAME)' '$(DESTDIR)$(LIBDIR)/libattn.so' \
	  '$(DESTDIR)$(PKGCONFIGDIR)/attn.pc' '$(DESTDIR)$(BINDIR)/attn' '$(DESTDIR)$(MAN1DIR)/attn.1' \
	  '$(DESTDIR)$(CMAKEDIR)/attnConfig.cmake' '$(DESTDIR)$(CMAKEDIR)/attnConfigVersion.cmake'
	rmdir '$(DESTDIR)$(CMAKEDIR)' 2>/dev/null || true

# attn(1) from the help texts of the tool just built
$(BUILD)/attn.1: $(BUILD)/attn tools/gen_man.sh
	sh tools/gen_man.sh '$(strip $(RUNNER) $(BUILD)/attn)' $(VERSION) > $@.tmp || { rm -f $@.tmp; exit 1; }
	mv $@.tmp $@

# The installed tree as a user sees it (tests/test_install.sh), run by
# tests/run.sh like a test program: this wrapper gives it the build's
# compiler, tools and sanitizer flags.
TEST_BIN += $(BUILD)/tests/test_install
MAKE_CMD := $(MAKE)
$(BUILD)/tests/test_install: tests/test_install.sh mk/install.mk $(BUILD)/libattn.so $(BUILD)/attn.1
	@mkdir -p $(dir $@)
	@printf '#!/bin/sh\n# written by mk/install.mk\ncd "%s" || exit 1\nexec env ATTN_TEST_BUILD="%s" ATTN_TEST_SAN="%s" CC="%s" NM="%s" ATTN_TEST_SAN_FLAGS="%s" MAKE="%s" sh tests/test_install.sh\n' \
	  '$(CURDIR)' '$(BUILD)' '$(SAN)' '$(CC)' '$(CROSS)nm' '$(filter -fsanitize%,$(OPT))' '$(MAKE_CMD)' > $@
	@chmod +x $@
