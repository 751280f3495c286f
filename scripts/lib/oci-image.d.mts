// Types of oci-image.mjs.
export declare function criCacheDir(): string;
export interface TarEntry {
    name: string;
    type: 'file' | 'dir' | 'symlink';
    mode?: number;
    data?: Buffer;
    linkname?: string;
}
/** A ustar archive of `entries`, in order, owned by root, mtime 0. */
export declare function tar(entries: TarEntry[]): Buffer;
export interface ImageFile {
    /** Absolute path inside the image. */
    dst: string;
    /** A host file to copy, or `data`. */
    src?: string;
    data?: Buffer;
    mode?: number;
}
export interface ImageDefinition {
    /** e.g. `localhost/podwire-test/pause:1` (the tag is what CRI and ctr see). */
    ref: string;
    entrypoint: string[];
    cmd?: string[];
    env?: string[];
    files: ImageFile[];
    /** Symlinks: path in the image → target. */
    symlinks?: Record<string, string>;
}
/** The OCI image-layout tarball of `def` (deterministic: the same input gives the same bytes). */
export declare function buildOciImage(def: ImageDefinition): Buffer;
export interface BuiltImage {
    ref: string;
    /** The OCI layout tarball in the cache dir. */
    tarball: string;
}
/** Builds `def` into the cache (content-addressed file name) and returns where it is. */
export declare function imageTarball(def: ImageDefinition): BuiltImage;
export declare const PAUSE_SOURCE = "#include <signal.h>\n#include <unistd.h>\nstatic void bye(int s) { (void)s; _exit(0); }\nint main(void) {\n  signal(SIGINT, bye);\n  signal(SIGTERM, bye);\n  for (;;) pause();\n}\n";
export declare const PAUSE_REF = "localhost/podwire-test/pause:1";
export declare const BUSYBOX_REF = "localhost/podwire-test/busybox:1";
/** The static pause binary, compiled once per machine (`cc -static -Os -s`, about 0.2 s). */
export declare function pauseBinary(): string;
/** True for an ELF executable without a PT_INTERP program header (nothing to load at run time). */
export declare function isStaticElf(path: string): boolean;
export declare function pauseImage(): BuiltImage;
export declare const BUSYBOX_BINARY = "/bin/busybox";
/** Whether Debian busybox-static's binary is there (a dynamically linked busybox cannot run in an empty image). */
export declare function busyboxAvailable(): boolean;
/** busybox with applet links in /bin, and /www/index.html for `httpd -h /www`. Entrypoint: /bin/sh. */
export declare function busyboxImage(): BuiltImage;
