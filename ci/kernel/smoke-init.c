// The init of `ci/kernel-rust.sh --check`: a boot of the Rust binder kernel
// that exercises the driver once through every path the executor relies on.
//
// It mounts devtmpfs, proc and binderfs, opens /dev/binderfs/binder, maps
// it, asks BINDER_VERSION, becomes the context manager, sends BC_INCREFS on
// handle 0 from the manager itself (refused with EINVAL, and logged by the
// driver: the log is read back with syslog(2)), creates a second device
// with BINDER_CTL_ADD on binder-control and becomes the context manager of
// that one too (each device is its own context). Every check prints one
// "smoke: ok ..." or "smoke: FAIL ..." line on the console, then a final
// "smoke: result: PASS" or "smoke: result: FAIL (n of m)", and the init
// reboots (tinyconfig has no ACPI to power off; QEMU runs with -no-reboot).
//
// Built with `gcc -static` against the system's uapi headers.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/klog.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <linux/android/binder.h>
#include <linux/android/binderfs.h>

#define MAP_SIZE (128 * 1024)
#define SECOND_DEVICE "smoke1"

static int checks, failures;

static void check(int ok, const char *what, const char *fmt, ...)
{
	va_list ap;

	checks++;
	if (!ok)
		failures++;
	printf("smoke: %s %s: ", ok ? "ok  " : "FAIL", what);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

// Prints the kernel log written since the last clear, line by line, and
// returns whether a line contains `needle`. The driver's pr_warn lines can
// come a moment after the ioctl returns: polled for up to a second.
static int print_klog(const char *needle)
{
	static char buf[16384];
	int found = 0;

	for (int tries = 0; tries < 20 && !found; tries++) {
		int n = klogctl(3 /* SYSLOG_ACTION_READ_ALL */, buf, sizeof(buf) - 1);

		if (n < 0) {
			printf("smoke: klogctl(3): %s\n", strerror(errno));
			return 0;
		}
		buf[n] = 0;
		found = strstr(buf, needle) != NULL;
		if (!found && tries < 19) {
			sleep_ms(50);
			continue;
		}
		for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n"))
			printf("smoke: klog: %s\n", line);
	}
	return found;
}

static void list_binderfs(void)
{
	DIR *d = opendir("/dev/binderfs");
	struct dirent *e;

	if (!d)
		return;
	printf("smoke: /dev/binderfs:");
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			printf(" %s", e->d_name);
	printf("\n");
	closedir(d);
}

// BINDER_VERSION, then BINDER_SET_CONTEXT_MGR, on an open device.
static void version_and_manager(int fd, const char *dev)
{
	struct binder_version v = { 0 };
	char what[64];
	int r;

	r = ioctl(fd, BINDER_VERSION, &v);
	snprintf(what, sizeof(what), "BINDER_VERSION on %s", dev);
	check(r == 0 && v.protocol_version == BINDER_CURRENT_PROTOCOL_VERSION, what,
	      "returned %d (%s), protocol version %d", r, r ? strerror(errno) : "no error",
	      (int)v.protocol_version);

	r = ioctl(fd, BINDER_SET_CONTEXT_MGR, 0);
	snprintf(what, sizeof(what), "BINDER_SET_CONTEXT_MGR on %s", dev);
	check(r == 0, what, "returned %d (%s)", r, r ? strerror(errno) : "no error");
}

int main(void)
{
	struct binder_write_read bwr = { 0 };
	struct binderfs_device device = { 0 };
	uint32_t cmds[2] = { BC_INCREFS, 0 };
	void *map;
	int fd, ctl, fd2, r;

	mkdir("/dev", 0755);
	mkdir("/proc", 0755);
	mount("devtmpfs", "/dev", "devtmpfs", 0, NULL);
	mount("proc", "/proc", "proc", 0, NULL);
	// With no /dev/console in the initramfs, the kernel started init
	// without a console: take it from devtmpfs.
	if (fcntl(1, F_GETFD) < 0) {
		int c = open("/dev/console", O_RDWR);

		if (c >= 0) {
			dup2(c, 0);
			dup2(c, 1);
			dup2(c, 2);
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);

	mkdir("/dev/binderfs", 0755);
	r = mount("binder", "/dev/binderfs", "binder", 0, NULL);
	check(r == 0, "mount binderfs", "returned %d (%s)", r, r ? strerror(errno) : "no error");
	list_binderfs();

	fd = open("/dev/binderfs/binder", O_RDWR | O_CLOEXEC);
	check(fd >= 0, "open /dev/binderfs/binder", "fd %d (%s)", fd, fd < 0 ? strerror(errno) : "no error");
	if (fd < 0)
		goto out;

	map = mmap(NULL, MAP_SIZE, PROT_READ, MAP_PRIVATE, fd, 0);
	check(map != MAP_FAILED, "mmap binder", "%s",
	      map == MAP_FAILED ? strerror(errno) : "mapped 128 KiB");

	version_and_manager(fd, "binder");

	// BC_INCREFS on handle 0 from the context manager itself: the driver
	// refuses it, and says so in the kernel log.
	klogctl(5 /* SYSLOG_ACTION_CLEAR */, NULL, 0);
	bwr.write_size = sizeof(cmds);
	bwr.write_buffer = (uintptr_t)cmds;
	r = ioctl(fd, BINDER_WRITE_READ, &bwr);
	check(r < 0 && errno == EINVAL, "BC_INCREFS 0 from the manager",
	      "returned %d (%s), write_consumed %llu; EINVAL expected", r,
	      r ? strerror(errno) : "no error", (unsigned long long)bwr.write_consumed);
	check(print_klog("Write failure"), "driver log of the refused BC_INCREFS",
	      "a kernel log line with \"Write failure\" expected");

	// A second device, its own context with its own manager.
	ctl = open("/dev/binderfs/binder-control", O_RDWR | O_CLOEXEC);
	check(ctl >= 0, "open binder-control", "fd %d (%s)", ctl, ctl < 0 ? strerror(errno) : "no error");
	if (ctl < 0)
		goto out;
	strcpy(device.name, SECOND_DEVICE);
	r = ioctl(ctl, BINDER_CTL_ADD, &device);
	check(r == 0, "BINDER_CTL_ADD " SECOND_DEVICE, "returned %d (%s), device %u:%u", r,
	      r ? strerror(errno) : "no error", device.major, device.minor);
	list_binderfs();
	fd2 = open("/dev/binderfs/" SECOND_DEVICE, O_RDWR | O_CLOEXEC);
	check(fd2 >= 0, "open /dev/binderfs/" SECOND_DEVICE, "fd %d (%s)", fd2,
	      fd2 < 0 ? strerror(errno) : "no error");
	if (fd2 >= 0)
		version_and_manager(fd2, SECOND_DEVICE);

out:
	if (failures)
		printf("smoke: result: FAIL (%d of %d checks)\n", failures, checks);
	else
		printf("smoke: result: PASS (%d checks)\n", checks);
	fflush(stdout);
	sync();
	reboot(RB_AUTOBOOT);
	return 0;
}
