# Splash: one core library, one binary, one shared object per plugin.
# Sources are discovered by directory; a new format or family is a new folder.

CC       ?= cc
CLANG    ?= clang
PREFIX   ?= /usr/local
DESTDIR  ?=
VERSION  := 0.1.0
# `make CROSS=aarch64-linux-gnu` builds for that target with $(CROSS)-gcc and -ar, the
# target's multiarch .pc files (Debian: dpkg --add-architecture, the -dev:arm64 packages)
# and a build tree of its own (build-aarch64-linux-gnu); `make test-arm64` runs its tests
CROSS    ?=
ifneq ($(CROSS),)
  CC     := $(CROSS)-gcc
  AR     := $(CROSS)-ar
  PKG_CONFIG ?= PKG_CONFIG_LIBDIR=/usr/lib/$(CROSS)/pkgconfig:/usr/share/pkgconfig pkg-config
  BUILD  ?= build-$(CROSS)
  ARCH   := $(firstword $(subst -, ,$(CROSS)))
else
  AR     := ar
  BUILD  ?= build
  ARCH   := $(shell uname -m)
endif
PKG_CONFIG ?= pkg-config

UNAME_S  := $(shell uname -s)
SO       := $(if $(filter Darwin,$(UNAME_S)),dylib,so)

PKGS      := jansson libpcre2-8 libutf8proc libmicrohttpd libcurl libcrypto zlib
# `make deps` installs what a fresh machine lacks; other goals stop early without it
NO_PKG_GOALS := deps test-deps clean
ifneq ($(or $(MAKECMDGOALS),all),$(filter $(NO_PKG_GOALS),$(MAKECMDGOALS)))
  PKG_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(PKGS) 2>/dev/null || echo SPLASH_PKG_MISSING)
  ifeq ($(PKG_CFLAGS),SPLASH_PKG_MISSING)
    $(error pkg-config or a library it looks for is missing ($(PKGS)): run `make deps` first)
  endif
  PKG_LIBS   := $(shell $(PKG_CONFIG) --libs $(PKGS))
endif

OPT      ?= -O2
# `make V=1` prints whole command lines
Q        := $(if $(V),,@)
say       = $(if $(V),,@printf '  %-6s %s\n' $1 $2;)
WARN     := -Wall -Wextra -Werror -Wno-unused-parameter
CFLAGS   ?=
ALL_CFLAGS := -std=c11 -D_GNU_SOURCE $(OPT) -g -fPIC $(WARN) -Iinclude -I. -I$(BUILD)/gen \
              $(PKG_CFLAGS) -DSPLASH_VERSION='"$(VERSION)"' $(CFLAGS)
LIBS     := $(PKG_LIBS) -lm -lpthread -ldl

# Per-file ISA flags by suffix: foo_avx2.c, foo_avx512.c (x86-64), foo_neon.c (arm64).
# foo_dotprod_neon.c: the Armv8.2 dot product (sdot/udot); foo_i8mm_neon.c: that and the int8
# matrix multiply (smmla); plain foo_neon.c: Armv8.0 Advanced SIMD
ISA_neon_dotprod := -march=armv8.2-a+dotprod
ISA_neon_i8mm := -march=armv8.2-a+dotprod+i8mm
ISA_avx2   := -mavx2 -mfma -mf16c
ISA_avx512 := -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni \
              -mavx512bf16 -mavx512vbmi
isa_flags = $(if $(filter %_avx512.c,$1),$(ISA_avx512),$(if $(filter %_avx2.c,$1),$(ISA_avx2),\
            $(if $(filter %_dotprod_neon.c,$1),$(ISA_neon_dotprod),\
            $(if $(filter %_i8mm_neon.c,$1),$(ISA_neon_i8mm),))))

ifeq ($(ARCH),x86_64)
  SKIP_SRCS := %_neon.c
else
  SKIP_SRCS := %_avx2.c %_avx512.c
endif
srcs_in = $(filter-out $(SKIP_SRCS),$(shell find $1 -name '*.c' 2>/dev/null | sort))

# The layers (docs/architecture.md; `make check-layers` holds includes to them):
# libsplash.so holds the plugin core (core/) and its compute layer (kernels/); the text
# library (server/text: tokenizer, grammar), the engine (server/engine), the HTTP front
# (the rest of server/) and the model writer (cli/modelgen) are archives above it.
CORE_SRCS    := $(call srcs_in,core kernels)
TEXT_SRCS    := $(call srcs_in,server/text)
ENGINE_SRCS  := $(call srcs_in,server/engine)
SERVER_SRCS  := $(filter-out server/text/% server/engine/%,$(call srcs_in,server))
MODELGEN_SRCS := $(call srcs_in,cli/modelgen)
CLI_SRCS     := $(filter-out cli/modelgen/%,$(call srcs_in,cli))
FORMATS      := $(sort $(notdir $(patsubst %/,%,$(dir $(wildcard formats/*/*.c)))))
FAMILIES     := $(filter-out common,$(sort $(notdir $(patsubst %/,%,$(dir $(wildcard families/*/*.c))))))
FAMILY_COMMON_SRCS := $(call srcs_in,families/common)
# Draft architectures (splash/draft.h): families/drafts/<name>/, one plugin each.
DRAFTS       := $(sort $(notdir $(patsubst %/,%,$(dir $(wildcard families/drafts/*/*.c)))))
ISA_SUFFIXES := %_avx2.c %_avx512.c %_neon.c
# A test is tests/test-NAME.c; its ISA units tests/test-NAME_avx2.c (_avx512.c, _neon.c) are
# compiled with that ISA's flags (isa_flags) and linked into it on the arch they are for.
TEST_SRCS    := $(filter-out $(ISA_SUFFIXES),$(wildcard tests/test-*.c))
TEST_ISA_SRCS := $(filter-out $(SKIP_SRCS),$(filter $(ISA_SUFFIXES),$(wildcard tests/test-*.c)))
test_isa_objs = $(call obj,$(filter tests/$(1)_%,$(TEST_ISA_SRCS)))
TEST_SUPPORT := $(call srcs_in,tests/support)
BENCH_SRCS   := $(wildcard bench/bench-*.c)
FUZZ_SRCS    := $(wildcard tests/fuzz/fuzz-*.c)

obj  = $(patsubst %.c,$(BUILD)/obj/%.o,$1)
pobj = $(patsubst %.c,$(BUILD)/pobj/%.o,$1)
bobj = $(patsubst %.c,$(BUILD)/bobj/%.o,$1)

LIBSPLASH   := $(BUILD)/libsplash.$(SO)
LIBSERVER   := $(BUILD)/libsplash-server.a
LIBENGINE   := $(BUILD)/libsplash-engine.a
LIBTEXT     := $(BUILD)/libsplash-text.a
LIBMODELGEN := $(BUILD)/libsplash-modelgen.a
# the archives above libsplash.so, in link order (each uses only those after it)
APP_LIBS    := $(LIBSERVER) $(LIBENGINE) $(LIBTEXT) $(LIBMODELGEN)
LIBBUILTIN  := $(BUILD)/libsplash-builtin.a
PLUGIN_DIR  := $(BUILD)/lib/splash
FORMAT_SOS  := $(foreach f,$(FORMATS),$(PLUGIN_DIR)/libsplash-format-$(f).$(SO))
FAMILY_SOS  := $(foreach f,$(FAMILIES),$(PLUGIN_DIR)/libsplash-family-$(f).$(SO))
DRAFT_SOS   := $(foreach f,$(DRAFTS),$(PLUGIN_DIR)/libsplash-draft-$(f).$(SO))
TESTS       := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRCS))
BENCHES     := $(patsubst bench/%.c,$(BUILD)/bench/%,$(BENCH_SRCS))
BROKEN_SOS  := $(patsubst tests/plugins/%.c,$(BUILD)/tests/plugins/%.$(SO),$(wildcard tests/plugins/*.c))

RPATH_BIN   := -Wl,-rpath,'$$ORIGIN' -Wl,-rpath,'$$ORIGIN/../lib'
RPATH_SUB   := -Wl,-rpath,'$$ORIGIN/..'

.PHONY: all test bench bench-neon bench-cache fuzz install clean plugins check-format deps test-deps deb check-layers \
        test-arm64
# keep intermediate objects (test support, generated sources) between builds
.SECONDARY:
all: $(BUILD)/splash $(LIBSPLASH) $(FORMAT_SOS) $(FAMILY_SOS) $(DRAFT_SOS) $(BUILD)/splash-plugin.pc

plugins: $(FORMAT_SOS) $(FAMILY_SOS) $(DRAFT_SOS)

# ---- objects -------------------------------------------------------------
$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(call say,CC,$<)$(CC) $(ALL_CFLAGS) $(call isa_flags,$<) -MMD -MP -c $< -o $@

# Plugin objects: only the entry symbol is visible.
$(BUILD)/pobj/%.o: %.c
	@mkdir -p $(dir $@)
	$(call say,CC,$<)$(CC) $(ALL_CFLAGS) -fvisibility=hidden $(call isa_flags,$<) -MMD -MP -c $< -o $@

# The same plugin sources for static linking (unit tests).
$(BUILD)/bobj/%.o: %.c
	@mkdir -p $(dir $@)
	$(call say,CC,$<)$(CC) $(ALL_CFLAGS) -DSPLASH_PLUGIN_BUILTIN -fvisibility=hidden $(call isa_flags,$<) \
	    -MMD -MP -c $< -o $@

# ---- core library, server archive, binary -------------------------------
$(LIBSPLASH): $(call obj,$(CORE_SRCS))
	$(call say,LD,$@)$(CC) -shared -o $@ $^ $(LIBS)

# The chat page, embedded in the binary (no outside assets).
$(BUILD)/gen/webui_html.c: server/webui/index.html
	@mkdir -p $(dir $@)
	@{ echo '/* Generated from server/webui/index.html by the Makefile. */'; \
	   echo 'const unsigned char splash_webui_html[] = {'; \
	   od -An -v -tx1 $< | sed 's/ *\([0-9a-f][0-9a-f]\)/0x\1,/g'; \
	   echo '};'; \
	   echo 'const unsigned long splash_webui_html_len = sizeof splash_webui_html;'; } > $@

WEBUI_OBJ := $(BUILD)/obj/$(BUILD)/gen/webui_html.o
$(WEBUI_OBJ): $(BUILD)/gen/webui_html.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(LIBSERVER): $(call obj,$(SERVER_SRCS)) $(WEBUI_OBJ)
	@mkdir -p $(dir $@)
	$(call say,AR,$@)rm -f $@ && $(AR) rcs $@ $^

$(LIBENGINE): $(call obj,$(ENGINE_SRCS))
	@mkdir -p $(dir $@)
	$(call say,AR,$@)rm -f $@ && $(AR) rcs $@ $^

$(LIBTEXT): $(call obj,$(TEXT_SRCS))
	@mkdir -p $(dir $@)
	$(call say,AR,$@)rm -f $@ && $(AR) rcs $@ $^

$(LIBMODELGEN): $(call obj,$(MODELGEN_SRCS))
	@mkdir -p $(dir $@)
	$(call say,AR,$@)rm -f $@ && $(AR) rcs $@ $^

# The mark tells build/splash it runs from a build tree: it then loads build/lib/splash
# (core/plugin_search.h); installed copies never carry it.
$(BUILD)/splash: $(call obj,$(CLI_SRCS)) $(APP_LIBS) $(LIBSPLASH) | $(BUILD)/.splash-build-tree
	$(call say,LD,$@)$(CC) -o $@ $(call obj,$(CLI_SRCS)) $(APP_LIBS) -L$(BUILD) -lsplash $(RPATH_BIN) $(LIBS)

$(BUILD)/.splash-build-tree:
	@mkdir -p $(dir $@)
	@echo 'Splash build tree: the splash binary here loads plugins from lib/splash beside it.' > $@

# ---- plugins -------------------------------------------------------------
define format_rule
$(PLUGIN_DIR)/libsplash-format-$(1).$(SO): $(call pobj,$(call srcs_in,formats/$(1)))
	@mkdir -p $$(dir $$@)
	$$(call say,LD,$$@)$$(CC) -shared -fvisibility=hidden -o $$@ $$^ -lm -lpthread
endef
define family_rule
$(PLUGIN_DIR)/libsplash-family-$(1).$(SO): $(call pobj,$(call srcs_in,families/$(1)) $(FAMILY_COMMON_SRCS))
	@mkdir -p $$(dir $$@)
	$$(call say,LD,$$@)$$(CC) -shared -fvisibility=hidden -o $$@ $$^ -lm -lpthread
endef
define draft_rule
$(PLUGIN_DIR)/libsplash-draft-$(1).$(SO): $(call pobj,$(call srcs_in,families/drafts/$(1)))
	@mkdir -p $$(dir $$@)
	$$(call say,LD,$$@)$$(CC) -shared -fvisibility=hidden -o $$@ $$^ -lm -lpthread
endef
$(foreach f,$(FORMATS),$(eval $(call format_rule,$(f))))
$(foreach f,$(FAMILIES),$(eval $(call family_rule,$(f))))
$(foreach f,$(DRAFTS),$(eval $(call draft_rule,$(f))))

BUILTIN_SRCS := $(foreach f,$(FORMATS),$(call srcs_in,formats/$(f))) \
                $(foreach f,$(FAMILIES),$(call srcs_in,families/$(f))) $(FAMILY_COMMON_SRCS) \
                $(foreach f,$(DRAFTS),$(call srcs_in,families/drafts/$(f)))

$(BUILD)/gen/builtin_plugins.c: Makefile $(wildcard formats/*) $(wildcard families/*) $(wildcard families/drafts/*)
	@mkdir -p $(dir $@)
	@{ echo '/* Generated by the Makefile: every plugin linked statically. */'; \
	   echo '#include "splash/plugin.h"'; \
	   for f in $(FORMATS); do echo "const struct splash_plugin_header *splash_builtin_format_$$f(const struct splash_host *);"; done; \
	   for f in $(FAMILIES); do echo "const struct splash_plugin_header *splash_builtin_family_$$f(const struct splash_host *);"; done; \
	   for f in $(DRAFTS); do echo "const struct splash_plugin_header *splash_builtin_draft_$$f(const struct splash_host *);"; done; \
	   echo 'const splash_plugin_entry_fn splash_builtin_plugins[] = {'; \
	   for f in $(FORMATS); do echo "    splash_builtin_format_$$f,"; done; \
	   for f in $(FAMILIES); do echo "    splash_builtin_family_$$f,"; done; \
	   for f in $(DRAFTS); do echo "    splash_builtin_draft_$$f,"; done; \
	   echo '    0,'; echo '};'; } > $@

$(LIBBUILTIN): $(call bobj,$(BUILTIN_SRCS)) $(BUILD)/obj/$(BUILD)/gen/builtin_plugins.o
	$(call say,AR,$@)rm -f $@ && $(AR) rcs $@ $^

$(BUILD)/obj/$(BUILD)/gen/builtin_plugins.o: $(BUILD)/gen/builtin_plugins.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/splash-plugin.pc: Makefile
	@mkdir -p $(dir $@)
	@printf 'prefix=%s\nincludedir=$${prefix}/include\nplugindir=$${prefix}/lib/splash\n\nName: splash-plugin\nDescription: Headers for Splash family and format plugins\nVersion: %s\nCflags: -I$${includedir} -fPIC -fvisibility=hidden\nLibs: -shared\n' \
	    '$(PREFIX)' '$(VERSION)' > $@

# ---- tests ---------------------------------------------------------------
# Plugins for the loader tests: deliberately broken ones, and ABI 1.0 format plugins.
$(BUILD)/tests/plugins/%.$(SO): tests/plugins/%.c $(wildcard tests/plugins/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -fvisibility=hidden -shared -o $@ $<

.SECONDEXPANSION:
$(BUILD)/tests/%: tests/%.c $$(call test_isa_objs,$$*) $(call obj,$(TEST_SUPPORT)) $(APP_LIBS) \
                  $(LIBBUILTIN) $(LIBSPLASH)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)$(CC) $(ALL_CFLAGS) -o $@ $< $(call test_isa_objs,$*) $(call obj,$(TEST_SUPPORT)) $(APP_LIBS) \
	    -Wl,--whole-archive $(LIBBUILTIN) -Wl,--no-whole-archive -L$(BUILD) -lsplash \
	    $(RPATH_SUB) $(LIBS) -lcmocka

# Includes point down the layers only (tests/check-layers.sh says which).
check-layers:
	@tests/check-layers.sh

test: check-layers all $(TESTS) $(BROKEN_SOS)
	@SPLASH_BUILD=$(abspath $(BUILD)) tests/run-tests.sh $(TESTS) tests/jinja-diff/run.sh \
	    tests/packaging/run.sh tests/integration

# ---- arm64 under emulation -------------------------------------------------
# Cross-builds the tree for arm64 (CROSS=aarch64-linux-gnu, its own build dir) and runs the
# unit tests that need no server process or host tools under qemu-aarch64-static, every
# SIMD row required, the format tests again on CPUs without i8mm and without the dot
# product, and the golden subset of test-qwen-hybrid with NEON and scalar rows
# (tests/run-arm64.sh).
ARM64_CROSS := aarch64-linux-gnu
ARM64_TESTS := test-format-kquants test-format-iquants test-format-rows test-format-fp4 \
               test-format-float test-format-affine test-format-pq2 test-act-quant test-gguf \
               test-kernels test-sampling
test-arm64:
	@$(MAKE) --no-print-directory CROSS=$(ARM64_CROSS) all \
	    $(addprefix build-$(ARM64_CROSS)/tests/,$(ARM64_TESTS) test-qwen-hybrid)
	@tests/run-arm64.sh build-$(ARM64_CROSS) $(ARM64_TESTS)

# ---- benchmarks ----------------------------------------------------------
$(BUILD)/bench/%: bench/%.c $(APP_LIBS) $(LIBBUILTIN) $(LIBSPLASH)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(APP_LIBS) -Wl,--whole-archive $(LIBBUILTIN) -Wl,--no-whole-archive \
	    -L$(BUILD) -lsplash $(RPATH_SUB) $(LIBS)

bench: all $(BENCHES)
	@bench/run-bench.sh $(BENCHES)

# The formats with NEON rows (bench-formats: mat-vec GB/s and % of the measured read
# bandwidth, in-cache and mat-mat speed, the row each runs); on x86-64 their AVX rows.
NEON_BENCH_TYPES := Q8_0 Q4_0 Q4_K Q5_K Q6_K IQ4_NL IQ4_XS MXFP4
bench-neon: all $(BUILD)/bench/bench-formats
	@$(BUILD)/bench/bench-formats $(NEON_BENCH_TYPES)

# the prefix cache alone: BENCH_CACHE_ARGS="-T 4096" for a shorter conversation
bench-cache: all $(BUILD)/bench/bench-cache
	@$(BUILD)/bench/bench-cache $(BENCH_CACHE_ARGS)

# ---- fuzzing (clang, libFuzzer, ASan+UBSan) -------------------------------
# The library is compiled once with sanitizer coverage; each target links it.
FUZZ_CFLAGS := -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=address,undefined \
               -fno-sanitize-recover=undefined -Iinclude -I. $(PKG_CFLAGS) \
               -DSPLASH_VERSION='"$(VERSION)"'
FUZZ_LIB_SRCS := $(CORE_SRCS) $(TEXT_SRCS) $(ENGINE_SRCS) $(SERVER_SRCS) $(MODELGEN_SRCS) \
                 $(BUILD)/gen/webui_html.c $(foreach f,$(DRAFTS),$(call srcs_in,families/drafts/$(f)))
fobj = $(patsubst %.c,$(BUILD)/fobj/%.o,$1)

$(BUILD)/fobj/%.o: %.c
	@mkdir -p $(dir $@)
	$(call say,CLANG,$<)$(CLANG) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link $(call isa_flags,$<) -c $< -o $@

$(BUILD)/libsplash-fuzz.a: $(call fobj,$(FUZZ_LIB_SRCS))
	$(call say,AR,$@)rm -f $@ && $(AR) rcs $@ $^

$(BUILD)/fuzz/%: tests/fuzz/%.c $(BUILD)/libsplash-fuzz.a
	@mkdir -p $(dir $@)
	$(call say,FUZZ,$@)$(CLANG) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(BUILD)/libsplash-fuzz.a $(LIBS)

fuzz: $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz/%,$(FUZZ_SRCS))

# ---- install -------------------------------------------------------------
# The man page, from the binary's own --help (packaging/gen-man.sh).
$(BUILD)/splash.1: $(BUILD)/splash packaging/gen-man.sh
	$(call say,MAN,$@)packaging/gen-man.sh $(BUILD)/splash > $@.tmp && mv $@.tmp $@

install: all $(BUILD)/splash.1
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/splash \
	    $(DESTDIR)$(PREFIX)/include/splash $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 755 $(BUILD)/splash $(DESTDIR)$(PREFIX)/bin/splash
	install -m 755 $(LIBSPLASH) $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(FORMAT_SOS) $(FAMILY_SOS) $(DRAFT_SOS) $(DESTDIR)$(PREFIX)/lib/splash/
	install -m 644 include/splash/*.h $(DESTDIR)$(PREFIX)/include/splash/
	@printf 'prefix=%s\nincludedir=$${prefix}/include\nplugindir=$${prefix}/lib/splash\n\nName: splash-plugin\nDescription: Headers for Splash family and format plugins\nVersion: %s\nCflags: -I$${includedir} -fPIC -fvisibility=hidden\nLibs: -shared\n' \
	    '$(PREFIX)' '$(VERSION)' > $(DESTDIR)$(PREFIX)/lib/pkgconfig/splash-plugin.pc
	install -d $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/doc/splash \
	    $(DESTDIR)$(PREFIX)/share/bash-completion/completions \
	    $(DESTDIR)$(PREFIX)/share/zsh/site-functions $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d
	install -m 644 $(BUILD)/splash.1 $(DESTDIR)$(PREFIX)/share/man/man1/splash.1
	install -m 644 packaging/completions/splash.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/splash
	install -m 644 packaging/completions/_splash $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_splash
	install -m 644 packaging/completions/splash.fish $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/splash.fish
	install -m 644 packaging/systemd/splash.env $(DESTDIR)$(PREFIX)/share/doc/splash/splash.env
	@# the systemd units (system and user) name the installed binary
	install -d $(DESTDIR)$(PREFIX)/lib/systemd/system $(DESTDIR)$(PREFIX)/lib/systemd/user
	sed 's|@BINDIR@|$(PREFIX)/bin|g' packaging/systemd/splash.service.in \
	    > $(DESTDIR)$(PREFIX)/lib/systemd/system/splash.service
	sed 's|@BINDIR@|$(PREFIX)/bin|g' packaging/systemd/splash-user.service.in \
	    > $(DESTDIR)$(PREFIX)/lib/systemd/user/splash.service
	install -d $(DESTDIR)$(PREFIX)/share/splash/demo
	install -m 644 packaging/demo/splash-demo-Q8_0.gguf packaging/demo/LICENSE \
	    packaging/demo/README.md $(DESTDIR)$(PREFIX)/share/splash/demo/

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -type f -name '*.d' 2>/dev/null)

# ---- fresh machine, packages ----------------------------------------------
# What a fresh machine lacks, from one list (packaging/dependencies.tsv, .ci/run reads it too).
deps:
	@packaging/deps.sh build

test-deps:
	@packaging/deps.sh build test

# build/deb/splash_<version>_<arch>.deb (packaging/build-deb.sh, dpkg-deb).
deb: all
	@packaging/build-deb.sh
