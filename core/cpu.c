/* CPU feature detection, once per process; SPLASH_FORCE_ISA narrows it for tests. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/host_impl.h"

#if defined(__x86_64__)
#include <cpuid.h>

static uint64_t xgetbv0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

static uint64_t detect(void)
{
    uint32_t a, b, c, d;
    uint64_t f = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return 0;
    int osxsave = (c >> 27) & 1;
    uint64_t xcr0 = osxsave ? xgetbv0() : 0;
    int avx_os = (xcr0 & 0x6) == 0x6;
    int avx512_os = (xcr0 & 0xe6) == 0xe6;
    if (avx_os && ((c >> 12) & 1))
        f |= SPLASH_CPU_FMA;
    if (avx_os && ((c >> 29) & 1))
        f |= SPLASH_CPU_F16C;
    if (__get_cpuid_max(0, NULL) < 7)
        return f;
    __cpuid_count(7, 0, a, b, c, d);
    if (avx_os && ((b >> 5) & 1))
        f |= SPLASH_CPU_AVX2;
    if (avx512_os) {
        if ((b >> 16) & 1)
            f |= SPLASH_CPU_AVX512F;
        if ((b >> 17) & 1)
            f |= SPLASH_CPU_AVX512DQ;
        if ((b >> 30) & 1)
            f |= SPLASH_CPU_AVX512BW;
        if ((b >> 31) & 1)
            f |= SPLASH_CPU_AVX512VL;
        if ((c >> 1) & 1)
            f |= SPLASH_CPU_AVX512VBMI;
        if ((c >> 11) & 1)
            f |= SPLASH_CPU_AVX512VNNI;
    }
    __cpuid_count(7, 1, a, b, c, d);
    if (avx_os && ((a >> 4) & 1))
        f |= SPLASH_CPU_AVXVNNI;
    if (avx512_os && ((a >> 5) & 1))
        f |= SPLASH_CPU_AVX512BF16;
    return f;
}
#elif defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>

/* The kernel's HWCAP bits (arch/arm64/include/uapi/asm/hwcap.h); spelled out so older
 * libc headers that lack a name still build. */
#define HWCAP_BIT_ASIMD (1ul << 1)
#define HWCAP_BIT_ASIMDDP (1ul << 20)
#define HWCAP_BIT_SVE (1ul << 22)
#define HWCAP2_BIT_I8MM (1ul << 13)
#define HWCAP2_BIT_BF16 (1ul << 14)

static uint64_t detect(void)
{
    const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    uint64_t f = 0;
    if (!(hw & HWCAP_BIT_ASIMD))
        return 0;
    f |= SPLASH_CPU_NEON;
    if (hw & HWCAP_BIT_ASIMDDP)
        f |= SPLASH_CPU_NEON_DOTPROD;
    if (hw2 & HWCAP2_BIT_I8MM)
        f |= SPLASH_CPU_NEON_I8MM;
    if (hw2 & HWCAP2_BIT_BF16)
        f |= SPLASH_CPU_NEON_BF16;
    if (hw & HWCAP_BIT_SVE)
        f |= SPLASH_CPU_SVE;
    return f;
}
#elif defined(__aarch64__)
/* Other arm64 systems: Advanced SIMD is architectural; the rest as compiled for. */
static uint64_t detect(void)
{
    uint64_t f = SPLASH_CPU_NEON;
#if defined(__ARM_FEATURE_DOTPROD)
    f |= SPLASH_CPU_NEON_DOTPROD;
#endif
#if defined(__ARM_FEATURE_MATMUL_INT8)
    f |= SPLASH_CPU_NEON_I8MM;
#endif
#if defined(__ARM_FEATURE_BF16)
    f |= SPLASH_CPU_NEON_BF16;
#endif
    return f;
}
#else
static uint64_t detect(void)
{
    return 0;
}
#endif

static const struct {
    uint64_t bit;
    const char *name;
} feature_names[] = {
    {SPLASH_CPU_AVX2, "avx2"},           {SPLASH_CPU_FMA, "fma"},
    {SPLASH_CPU_F16C, "f16c"},           {SPLASH_CPU_AVX512F, "avx512f"},
    {SPLASH_CPU_AVX512BW, "avx512bw"},   {SPLASH_CPU_AVX512VL, "avx512vl"},
    {SPLASH_CPU_AVX512DQ, "avx512dq"},   {SPLASH_CPU_AVX512VNNI, "avx512vnni"},
    {SPLASH_CPU_AVX512BF16, "avx512bf16"}, {SPLASH_CPU_AVXVNNI, "avxvnni"},
    {SPLASH_CPU_AVX512VBMI, "avx512vbmi"}, {SPLASH_CPU_NEON, "neon"},
    {SPLASH_CPU_NEON_DOTPROD, "dotprod"}, {SPLASH_CPU_NEON_I8MM, "i8mm"},
    {SPLASH_CPU_NEON_BF16, "bf16"},      {SPLASH_CPU_SVE, "sve"},
};

#define AVX2_SET (SPLASH_CPU_AVX2 | SPLASH_CPU_FMA | SPLASH_CPU_F16C)

static uint64_t features;
static const char *forced;
static pthread_once_t features_once = PTHREAD_ONCE_INIT;

static void features_init(void)
{
    features = detect();
    const char *env = getenv("SPLASH_FORCE_ISA");
    if (!env || !*env)
        return;
    forced = env;
    if (!strcmp(env, "scalar"))
        features = 0;
    else if (!strcmp(env, "avx2"))
        features &= AVX2_SET;
    else if (!strcmp(env, "neon"))
        features &= SPLASH_CPU_NEON; /* Armv8.0 Advanced SIMD: no dot product rows */
    else if (!strcmp(env, "dotprod"))
        features &= SPLASH_CPU_NEON | SPLASH_CPU_NEON_DOTPROD;
    /* "avx512", "i8mm" and anything else: keep what the CPU has */
}

uint64_t splash_cpu_features(void)
{
    pthread_once(&features_once, features_init);
    return features;
}

void splash_cpu_describe(char *buf, size_t size)
{
    uint64_t f = splash_cpu_features();
    size_t used = 0;
    buf[0] = 0;
    for (size_t i = 0; i < sizeof feature_names / sizeof feature_names[0]; i++) {
        if (!(f & feature_names[i].bit))
            continue;
        int n = snprintf(buf + used, size - used, "%s%s", used ? " " : "", feature_names[i].name);
        if (n < 0 || (size_t)n >= size - used)
            return;
        used += (size_t)n;
    }
    if (!used)
        snprintf(buf, size, "scalar");
    if (forced) {
        used = strlen(buf);
        snprintf(buf + used, size - used, " (SPLASH_FORCE_ISA=%s)", forced);
    }
}
