/*
 * cpu_probe.c - the plugin descriptor and the probe that decides whether this
 * variant of the CPU backend can run here.
 *
 * This file is compiled without the variant's -m flags: the core calls
 * loom_plugin_entry() and probe() before anything else of the plugin, so they
 * must run on any x86-64 (or other) CPU and refuse, with a reason, where the
 * kernels would fault.
 */
#include "cpu_backend.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#if defined(LOOM_CPU_AMX) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

/* The generic variant runs anywhere and checks nothing. */
#if !defined(LOOM_CPU_GENERIC) && (defined(__x86_64__) || defined(__i386__))
#include <cpuid.h>
#define CPU_PROBE_X86 1
#endif

#define CPU_STR_(x) #x
#define CPU_STR(x) CPU_STR_(x)
#define CPU_PLUGIN_VERSION \
	CPU_STR(LOOM_VERSION_MAJOR) "." CPU_STR(LOOM_VERSION_MINOR) "." CPU_STR(LOOM_VERSION_PATCH)

#if defined(LOOM_CPU_AMX)
#define CPU_PROBE_SCORE 40
#define CPU_DESCRIPTION "CPU backend for CPUs with AMX tiles: AVX-512 F/BW/VL/DQ + VNNI kernels, tile state enabled"
#elif defined(LOOM_CPU_AVX512)
#define CPU_PROBE_SCORE 30
#define CPU_DESCRIPTION "CPU backend, AVX-512 F/BW/VL/DQ + VNNI kernels"
#elif defined(LOOM_CPU_AVX2)
#define CPU_PROBE_SCORE 20
#define CPU_DESCRIPTION "CPU backend, AVX2 + FMA + F16C kernels"
#elif defined(LOOM_CPU_GENERIC)
#define CPU_PROBE_SCORE 10
#define CPU_DESCRIPTION "CPU backend, portable C reference kernels"
#else
#error "define one of LOOM_CPU_GENERIC, LOOM_CPU_AVX2, LOOM_CPU_AVX512, LOOM_CPU_AMX"
#endif

#ifdef CPU_PROBE_X86

/* CPUID and XCR0 bits we rely on (Intel SDM vol. 2A, CPUID; vol. 1, 13.3). */
enum {
	LEAF1_ECX_FMA = 1u << 12,
	LEAF1_ECX_OSXSAVE = 1u << 27,
	LEAF1_ECX_AVX = 1u << 28,
	LEAF1_ECX_F16C = 1u << 29,
	LEAF7_EBX_AVX2 = 1u << 5,
	LEAF7_EBX_AVX512F = 1u << 16,
	LEAF7_EBX_AVX512DQ = 1u << 17,
	LEAF7_EBX_AVX512BW = 1u << 30,
	LEAF7_EBX_AVX512VL = 1u << 31,
	LEAF7_ECX_AVX512VNNI = 1u << 11,
	LEAF7_EDX_AMX_BF16 = 1u << 22,
	LEAF7_EDX_AMX_TILE = 1u << 24,
	LEAF7_EDX_AMX_INT8 = 1u << 25,
};

/* XCR0 state components. XTILEDATA is enabled in XCR0 but, on Linux, first
 * touched only after the process asks for it (arch_prctl below). */
#define XCR0_YMM 0x6ull      /* SSE and AVX state */
#define XCR0_ZMM 0xe6ull     /* the above plus opmask, ZMM0-15 upper halves, ZMM16-31 */
#define XCR0_TILE 0x60000ull /* XTILECFG and XTILEDATA */

typedef struct cpu_features {
	unsigned leaf1_ecx;
	unsigned leaf7_ebx;
	unsigned leaf7_ecx;
	unsigned leaf7_edx;
	unsigned long long xcr0; /* 0 when the OS does not expose XGETBV */
} cpu_features;

/* XGETBV by opcode, so that this file needs no -mxsave. */
static unsigned long long read_xcr0(void)
{
	unsigned lo, hi;
	__asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(lo), "=d"(hi) : "c"(0));
	return ((unsigned long long)hi << 32) | lo;
}

static cpu_features read_features(void)
{
	cpu_features f = {0};
	unsigned a, b, c, d;

	if (__get_cpuid(1, &a, &b, &c, &d))
		f.leaf1_ecx = c;
	if (__get_cpuid_max(0, NULL) >= 7) {
		__cpuid_count(7, 0, a, b, c, d);
		f.leaf7_ebx = b;
		f.leaf7_ecx = c;
		f.leaf7_edx = d;
	}
	if (f.leaf1_ecx & LEAF1_ECX_OSXSAVE)
		f.xcr0 = read_xcr0();
	return f;
}

typedef struct cpu_requirement {
	const unsigned *reg;
	unsigned bit;
	const char *name;
} cpu_requirement;

/* The first requirement the CPU misses, or NULL. */
static const char *missing_feature(const cpu_requirement *req, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((*req[i].reg & req[i].bit) == 0)
			return req[i].name;
	return NULL;
}

#if defined(LOOM_CPU_AMX)
/* Linux keeps the 8 KiB of tile data out of a thread's state until the
 * process asks for it (kernel 5.16 and later); the first tile instruction
 * before that is a SIGILL. The permission holds for every thread. */
static bool request_tile_permission(char *why, size_t why_size)
{
#if defined(__linux__) && defined(SYS_arch_prctl)
	enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
	if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0)
		return true;
	snprintf(why, why_size, "the kernel refuses the AMX tile state (arch_prctl: %s)", strerror(errno));
	return false;
#else
	snprintf(why, why_size, "AMX tile state is only requested on Linux");
	return false;
#endif
}
#endif

static int probe_x86(char *why, size_t why_size)
{
	cpu_features f = read_features();
#if defined(LOOM_CPU_AVX512) || defined(LOOM_CPU_AMX)
	const cpu_requirement req[] = {
		{&f.leaf1_ecx, LEAF1_ECX_AVX, "AVX"},
		{&f.leaf1_ecx, LEAF1_ECX_FMA, "FMA"},
		{&f.leaf1_ecx, LEAF1_ECX_F16C, "F16C"},
		{&f.leaf7_ebx, LEAF7_EBX_AVX2, "AVX2"},
		{&f.leaf7_ebx, LEAF7_EBX_AVX512F, "AVX512F"},
		{&f.leaf7_ebx, LEAF7_EBX_AVX512BW, "AVX512BW"},
		{&f.leaf7_ebx, LEAF7_EBX_AVX512VL, "AVX512VL"},
		{&f.leaf7_ebx, LEAF7_EBX_AVX512DQ, "AVX512DQ"},
		{&f.leaf7_ecx, LEAF7_ECX_AVX512VNNI, "AVX512_VNNI"},
#if defined(LOOM_CPU_AMX)
		{&f.leaf7_edx, LEAF7_EDX_AMX_TILE, "AMX-TILE"},
		{&f.leaf7_edx, LEAF7_EDX_AMX_INT8, "AMX-INT8"},
		{&f.leaf7_edx, LEAF7_EDX_AMX_BF16, "AMX-BF16"},
#endif
	};
#if defined(LOOM_CPU_AMX)
	const unsigned long long xcr0_need = XCR0_ZMM | XCR0_TILE;
	const char *state = "ZMM/opmask and AMX tile";
#else
	const unsigned long long xcr0_need = XCR0_ZMM;
	const char *state = "ZMM/opmask";
#endif
#else
	const cpu_requirement req[] = {
		{&f.leaf1_ecx, LEAF1_ECX_AVX, "AVX"},
		{&f.leaf1_ecx, LEAF1_ECX_FMA, "FMA"},
		{&f.leaf1_ecx, LEAF1_ECX_F16C, "F16C"},
		{&f.leaf7_ebx, LEAF7_EBX_AVX2, "AVX2"},
	};
	const unsigned long long xcr0_need = XCR0_YMM;
	const char *state = "YMM";
#endif
	const char *miss = missing_feature(req, sizeof(req) / sizeof(req[0]));

	if (miss != NULL) {
		snprintf(why, why_size, "CPU lacks %s", miss);
		return 0;
	}
	if ((f.xcr0 & xcr0_need) != xcr0_need) {
		snprintf(why, why_size, "the OS has not enabled %s register state", state);
		return 0;
	}
#if defined(LOOM_CPU_AMX)
	if (!request_tile_permission(why, why_size))
		return 0;
#endif
	return CPU_PROBE_SCORE;
}

#endif /* CPU_PROBE_X86 */

#if defined(LOOM_CPU_AMX)
/* The amx option of the plugins.yaml entry. `amx: off` refuses before the
 * CPU is looked at, so that the path a CPU without AMX takes can be chosen
 * (and tested) on any machine: score 0 with the reason. A bad key or value
 * is a mistake in the file: -1, which the core reports as a warning. */
static int amx_option_score(const loom_probe_args *args, char *why, size_t why_size)
{
	bool has_options = args != NULL && args->struct_size >= offsetof(loom_probe_args, option_values) +
									   sizeof(args->option_values);
	for (int i = 0; has_options && i < args->n_options; i++) {
		const char *key = args->option_keys[i], *value = args->option_values[i];
		if (strcmp(key, CPU_AMX_OPTION) != 0) {
			snprintf(why, why_size, "unknown option '%s' (this backend takes %s: on|off)", key,
				 CPU_AMX_OPTION);
			return -1;
		}
		if (strcmp(value, "off") == 0) {
			snprintf(why, why_size, "turned off in plugins.yaml (%s: off)", CPU_AMX_OPTION);
			return 0;
		}
		if (strcmp(value, "on") != 0) {
			snprintf(why, why_size, "option %s must be on or off, not '%s'", CPU_AMX_OPTION, value);
			return -1;
		}
	}
	return CPU_PROBE_SCORE;
}
#endif

/* why may be NULL with why_size 0: snprintf then writes nothing. */
static int cpu_probe(const loom_probe_args *args, char *why, size_t why_size)
{
	(void)args;
	if (why != NULL && why_size > 0)
		why[0] = '\0';
#if defined(LOOM_CPU_AMX)
	int option_score = amx_option_score(args, why, why_size);
	if (option_score <= 0)
		return option_score;
#endif
#if defined(LOOM_CPU_GENERIC)
	return CPU_PROBE_SCORE;
#elif defined(CPU_PROBE_X86)
	return probe_x86(why, why_size);
#else
	snprintf(why, why_size, "not an x86 CPU");
	return 0;
#endif
}

static const loom_plugin_desc cpu_descriptor = {
	.abi_version = LOOM_PLUGIN_ABI_VERSION,
	.kind = LOOM_PLUGIN_BACKEND,
	.name = LOOM_CPU_VARIANT_NAME,
	.version = CPU_PLUGIN_VERSION,
	.description = CPU_DESCRIPTION,
	.probe = cpu_probe,
	.vtable = &cpu_backend_vtable,
};

LOOM_PLUGIN_DEFINE(cpu_descriptor)
