# make fuzz: the libFuzzer targets of tests/fuzz/ (docs/FUZZING.md), built
# with clang (FUZZ_CC) into FUZZ_BUILD (build-fuzz/) by a second make at
# SAN=fuzz, so the gcc build and make test never need clang.
#   make fuzz                         build FUZZ_BUILD/fuzz/fuzz_<target>
#   make fuzz-run [FUZZ_SECONDS=30] [FUZZ_TARGETS="sdpa json"] [FUZZ_JOBS=2]
#                                     run each target (tests/fuzz/run.sh)
FUZZ_CC ?= clang
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 30
FUZZ_JOBS ?= 2
# the mail reader's target needs GMime
FUZZ_ALL := json safetensors sdpa layer bpe gpt2tok model decode $(if $(filter gmime-3.0,$(APP_PKGS)),mail)
FUZZ_TARGETS ?= $(FUZZ_ALL)
FUZZ_BIN := $(FUZZ_TARGETS:%=$(BUILD)/fuzz/fuzz_%)

.PHONY: fuzz fuzz-bins fuzz-run
fuzz:
	@$(MAKE) --no-print-directory -j$(FUZZ_JOBS) SAN=fuzz CC=$(FUZZ_CC) BUILD=$(FUZZ_BUILD) fuzz-bins
fuzz-bins: $(FUZZ_BIN)
fuzz-run: fuzz
	sh tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_JOBS) $(FUZZ_TARGETS)

# The attn tool's main() is renamed in this build: libFuzzer brings its own,
# and the sdpa target calls cli/ code in-process.
$(BUILD)/fuzz/fuzz_%: $(BUILD)/tests/fuzz/fuzz_%.o $(BUILD)/tests/fuzz/fuzz_file.o $(CLI_OBJ) \
    $(APP_OBJ) $(BUILD)/libattn.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -fsanitize=fuzzer -o $@ $(filter %.o,$^) $(BUILD)/libattn.a $(APP_LIBS) $(LDLIBS)
$(BUILD)/src/cli/main.o: CFLAGS += $(if $(filter fuzz,$(SAN)),-Dmain=attn_cli_main)
$(BUILD)/tests/fuzz/%.o: $(wildcard tests/fuzz/*.h)
# objects, not intermediates to delete after the link
.SECONDARY: $(FUZZ_ALL:%=$(BUILD)/tests/fuzz/fuzz_%.o) $(BUILD)/tests/fuzz/fuzz_file.o
