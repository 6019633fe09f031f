//! A gzip-compressed `newc` cpio archive, the format the kernel unpacks as
//! its initramfs (`Documentation/driver-api/early-userspace/buffer-format.rst`).

use flate2::write::GzEncoder;
use flate2::Compression;
use std::io::{self, Write};
use std::path::Path;

const S_IFDIR: u32 = 0o040000;
const S_IFREG: u32 = 0o100000;
const S_IFCHR: u32 = 0o020000;

struct Entry {
    name: String,
    mode: u32,
    rdev: (u32, u32),
    data: Vec<u8>,
}

/// The archive's entries, in the order they are added (a directory before
/// what it holds).
#[derive(Default)]
pub struct Initramfs {
    entries: Vec<Entry>,
}

impl Initramfs {
    /// An empty archive.
    pub fn new() -> Initramfs {
        Initramfs::default()
    }

    fn push(&mut self, name: &str, mode: u32, rdev: (u32, u32), data: Vec<u8>) {
        let name = name.trim_start_matches('/').to_string();
        self.entries.push(Entry {
            name,
            mode,
            rdev,
            data,
        });
    }

    /// A directory (mode 0755).
    pub fn dir(&mut self, path: &str) -> &mut Self {
        self.push(path, S_IFDIR | 0o755, (0, 0), Vec::new());
        self
    }

    /// A regular file with this permission (`0o755` for a program).
    pub fn file(&mut self, path: &str, perm: u32, data: Vec<u8>) -> &mut Self {
        self.push(path, S_IFREG | (perm & 0o7777), (0, 0), data);
        self
    }

    /// A character device node (`/dev/console` is 5:1).
    pub fn char_dev(&mut self, path: &str, major: u32, minor: u32) -> &mut Self {
        self.push(path, S_IFCHR | 0o600, (major, minor), Vec::new());
        self
    }

    /// The uncompressed archive.
    pub fn to_cpio(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let trailer = Entry {
            name: "TRAILER!!!".into(),
            mode: 0,
            rdev: (0, 0),
            data: Vec::new(),
        };
        for (ino, e) in self.entries.iter().chain([&trailer]).enumerate() {
            let nlink = if e.mode & S_IFDIR != 0 { 2 } else { 1 };
            let fields = [
                if e.name == "TRAILER!!!" {
                    0
                } else {
                    ino as u32 + 1
                },
                e.mode,
                0,
                0,
                nlink,
                0,
                e.data.len() as u32,
                0,
                0,
                e.rdev.0,
                e.rdev.1,
                e.name.len() as u32 + 1,
                0,
            ];
            out.extend_from_slice(b"070701");
            for f in fields {
                out.extend_from_slice(format!("{f:08x}").as_bytes());
            }
            out.extend_from_slice(e.name.as_bytes());
            out.push(0);
            pad4(&mut out);
            out.extend_from_slice(&e.data);
            pad4(&mut out);
        }
        out
    }

    /// The gzip-compressed archive.
    pub fn to_gzip(&self) -> io::Result<Vec<u8>> {
        let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
        gz.write_all(&self.to_cpio())?;
        gz.finish()
    }

    /// Writes the gzip-compressed archive to `path`.
    pub fn write_gzip(&self, path: &Path) -> io::Result<()> {
        std::fs::write(path, self.to_gzip()?)
    }
}

fn pad4(out: &mut Vec<u8>) {
    while out.len() % 4 != 0 {
        out.push(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newc_layout() {
        let mut a = Initramfs::new();
        a.dir("/dev")
            .char_dev("/dev/console", 5, 1)
            .file("/init", 0o755, b"abc".to_vec());
        let c = a.to_cpio();
        // Every header starts with the magic at a 4-byte boundary.
        assert!(c.starts_with(b"070701"));
        assert_eq!(c.len() % 4, 0);
        let text = String::from_utf8_lossy(&c);
        assert_eq!(text.matches("070701").count(), 4);
        assert!(text.contains("dev/console\0"));
        assert!(text.contains("TRAILER!!!\0"));
        // The file's header: mode 0100755, size 3, name size 5 ("init\0").
        let at = text.find("init\0").unwrap() - 110;
        let field = |i: usize| &text[at + 6 + 8 * i..at + 14 + 8 * i];
        assert_eq!(field(1), "000081ed");
        assert_eq!(field(6), "00000003");
        assert_eq!(field(11), "00000005");
        // The console's device numbers.
        let at = text.find("dev/console\0").unwrap() - 110;
        let field = |i: usize| &text[at + 6 + 8 * i..at + 14 + 8 * i];
        assert_eq!((field(9), field(10)), ("00000005", "00000001"));
        // gzip round trip.
        let gz = a.to_gzip().unwrap();
        let mut d = flate2::read::GzDecoder::new(&gz[..]);
        let mut back = Vec::new();
        std::io::Read::read_to_end(&mut d, &mut back).unwrap();
        assert_eq!(back, c);
    }
}
