/* Status codes, messages, dtypes and half-precision conversions. */
#include "harness.h"
#include "kernels/cpu.h"

static void test_error_message_is_set_and_cleared(void) {
  attn_clear_error();
  CHECK(attn_last_error()[0] == '\0');
  CHECK(attn_set_error(ATTN_EINVAL, "tensor '%s' has rank %d", "q", 3) == ATTN_EINVAL);
  CHECK(strcmp(attn_last_error(), "tensor 'q' has rank 3") == 0);
  CHECK(strcmp(attn_status_str(ATTN_ENOMEM), "out of memory") == 0);
  CHECK(attn_prefix_error(ATTN_EFORMAT, "model.safetensors") == ATTN_EFORMAT);
  CHECK(strcmp(attn_last_error(), "model.safetensors: tensor 'q' has rank 3") == 0);
}

/* A message formatted from the last message itself (a caller adding context)
 * reads its argument before overwriting it: no "a: a: ..." echo or garbling. */
static void test_error_message_may_quote_itself(void) {
  attn_set_error(ATTN_EINVAL, "expected an array of strings at byte 1");
  attn_set_error(ATTN_EFORMAT, "metadata '%s': %s", "tokens", attn_last_error());
  CHECK(strcmp(attn_last_error(), "metadata 'tokens': expected an array of strings at byte 1") ==
        0);
  attn_set_error(ATTN_EINVAL, "%s", "x");
  attn_set_error(ATTN_EINVAL, "%s%s%s", attn_last_error(), attn_last_error(), attn_last_error());
  CHECK(strcmp(attn_last_error(), "xxx") == 0);
}

static void test_dtype_names_round_trip(void) {
  for (int i = 0; i < ATTN_DTYPE_COUNT; i++) {
    attn_dtype t;
    CHECK_OK(attn_dtype_from_name(attn_dtype_name((attn_dtype)i), &t));
    CHECK(t == (attn_dtype)i);
  }
  attn_dtype t;
  CHECK_ERR(attn_dtype_from_name("F128", &t), ATTN_EUNSUPPORTED);
  CHECK(attn_dtype_size(ATTN_BF16) == 2 && attn_dtype_size(ATTN_I64) == 8);
}

static void test_bf16_rounds_to_nearest_even(void) {
  CHECK(attn_f32_to_bf16(1.0f) == 0x3f80);
  /* 1 + 2^-8 is halfway between bf16 1.0 and 1.0078125: ties to even (1.0) */
  CHECK(attn_f32_to_bf16(1.00390625f) == 0x3f80);
  CHECK(attn_f32_to_bf16(1.01171875f) == 0x3f82); /* halfway, rounds up to even */
  CHECK(attn_bf16_to_f32(0xc040) == -3.0f);
  CHECK(isnan(attn_bf16_to_f32(attn_f32_to_bf16(NAN))));
}

static void test_f16_matches_ieee_half(void) {
  CHECK(attn_f32_to_f16(1.0f) == 0x3c00);
  CHECK(attn_f32_to_f16(-2.0f) == 0xc000);
  CHECK(attn_f32_to_f16(65504.0f) == 0x7bff);
  CHECK(attn_f32_to_f16(70000.0f) == 0x7c00);
  CHECK(attn_f32_to_f16(5.9604645e-08f) == 0x0001); /* smallest subnormal */
  CHECK(attn_f16_to_f32(0x0001) == 5.9604645e-08f);
  CHECK(attn_f16_to_f32(0x3555) == 0.33325195f);
  int exact = 1;
  for (unsigned h = 0; h < 0x7c00; h++) /* every finite positive half round-trips */
    if (attn_f32_to_f16(attn_f16_to_f32((uint16_t)h)) != h) exact = 0;
  CHECK(exact);
}

static void test_cpu_features_are_consistent(void) {
  const attn_cpu_features *f = attn_cpu(), *d = attn_cpu_detected();
  CHECK(f != NULL && d != NULL);
  if (f->avx512bw) CHECK(f->avx512f);
  /* the level's features are a subset of the CPU's */
  CHECK(!f->avx512f || d->avx512f);
  CHECK(!f->avx2 || d->avx2);
  CHECK(!f->amx_tile || d->amx_tile);
  CHECK(attn_get_num_threads() >= 1);
}

/* Cache sizes: sysfs's size strings parsed, bad ones refused; the levels
 * outside 1-4 unknown; the last level the highest one known; on Linux
 * with sysfs, L1's size the one cpu0's first data cache gives. */
static void test_cache_sizes(void) {
  CHECK(attn_cpu_cache_size_parse("32K") == 32768);
  CHECK(attn_cpu_cache_size_parse("512K\n") == 524288);
  CHECK(attn_cpu_cache_size_parse("32768K\n") == 32 << 20);
  CHECK(attn_cpu_cache_size_parse("32M") == 32 << 20);
  CHECK(attn_cpu_cache_size_parse("1G") == 1 << 30);
  CHECK(attn_cpu_cache_size_parse("4096") == 4096);
  CHECK(attn_cpu_cache_size_parse("") == -1);
  CHECK(attn_cpu_cache_size_parse("K") == -1);
  CHECK(attn_cpu_cache_size_parse("12X") == -1);
  CHECK(attn_cpu_cache_size_parse("-5K") == -1);
  CHECK(attn_cpu_cache_size_parse("99999999999999999999K") == -1);
  CHECK(attn_cpu_cache_size_parse(NULL) == -1);
  CHECK(attn_cpu_cache_bytes(0) == 0 && attn_cpu_cache_bytes(5) == 0);
  int64_t top = 0;
  for (int level = 1; level <= 4; level++) {
    CHECK(attn_cpu_cache_bytes(level) >= 0);
    if (level >= 2 && attn_cpu_cache_bytes(level) > 0) top = attn_cpu_cache_bytes(level);
  }
  CHECK(attn_cpu_llc_bytes() == top);
  FILE *f = fopen("/sys/devices/system/cpu/cpu0/cache/index0/size", "r");
  char buf[32] = "", type[32] = "";
  if (f) {
    if (!fgets(buf, sizeof buf, f)) buf[0] = 0;
    fclose(f);
    FILE *t = fopen("/sys/devices/system/cpu/cpu0/cache/index0/type", "r");
    if (t) {
      if (!fgets(type, sizeof type, t)) type[0] = 0;
      fclose(t);
    }
    /* index0 is L1 data on x86 and arm64 Linux */
    if (!strncmp(type, "Data", 4)) CHECK(attn_cpu_cache_bytes(1) == attn_cpu_cache_size_parse(buf));
  }
}

/* ISA levels: generic is always there; every available level can be
 * switched to and reports itself; unknown and unavailable names are refused
 * with the available levels in the message; the active level comes back. */
static void test_isa_levels(void) {
  attn_isa active = attn_isa_active(), isa;
  CHECK(attn_isa_available(ATTN_ISA_GENERIC));
  CHECK(attn_isa_available(active));
  CHECK(strlen(attn_isa_reason()) > 0);
  for (int i = 0; i < ATTN_ISA_COUNT; i++) {
    attn_status st = attn_set_isa((attn_isa)i);
    if (!attn_isa_available((attn_isa)i)) {
      CHECK(st == ATTN_EUNSUPPORTED);
      CHECK_OK(attn_isa_from_name(attn_isa_name(ATTN_ISA_GENERIC), &isa));
      CHECK(attn_isa_from_name(attn_isa_name((attn_isa)i), &isa) == ATTN_EUNSUPPORTED);
      CHECK(strstr(attn_last_error(), "generic") != NULL);
      continue;
    }
    CHECK_OK(st);
    CHECK(attn_isa_active() == (attn_isa)i);
    CHECK_OK(attn_isa_from_name(attn_isa_name((attn_isa)i), &isa));
    CHECK(isa == (attn_isa)i);
    if (i == ATTN_ISA_GENERIC) CHECK(!attn_cpu()->avx2 && !attn_cpu()->avx512f && !attn_cpu()->neon);
    if (i == ATTN_ISA_AVX2) CHECK(attn_cpu()->avx2 && !attn_cpu()->avx512f && !attn_cpu()->amx_tile);
  }
  CHECK(attn_isa_from_name("sse9", &isa) == ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "sse9") != NULL);
  CHECK(attn_isa_from_name(NULL, &isa) == ATTN_EINVAL);
  CHECK_OK(attn_isa_from_name("native", &isa));
  CHECK(attn_isa_available(isa));
  CHECK(attn_set_isa((attn_isa)99) == ATTN_EUNSUPPORTED);
  CHECK_OK(attn_set_isa(active));
  CHECK(attn_isa_active() == active);
}

/* The library's run-time version is the header's, and the number spells the string. */
static void test_version_matches_the_header(void) {
  int v = attn_version();
  CHECK(v == ATTN_VERSION_NUMBER);
  CHECK(v == ATTN_VERSION_MAJOR * 10000 + ATTN_VERSION_MINOR * 100 + ATTN_VERSION_PATCH);
  CHECK(!strcmp(attn_version_string(), ATTN_VERSION));
  char s[32];
  snprintf(s, sizeof s, "%d.%d.%d", v / 10000, v / 100 % 100, v % 100);
  CHECK(!strcmp(s, attn_version_string()));
}

int main(void) {
  RUN(test_error_message_is_set_and_cleared);
  RUN(test_error_message_may_quote_itself);
  RUN(test_dtype_names_round_trip);
  RUN(test_bf16_rounds_to_nearest_even);
  RUN(test_f16_matches_ieee_half);
  RUN(test_cpu_features_are_consistent);
  RUN(test_cache_sizes);
  RUN(test_isa_levels);
  RUN(test_version_matches_the_header);
  HARNESS_END();
}
