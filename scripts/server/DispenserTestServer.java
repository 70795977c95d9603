// Local MongoDB wire-protocol server for dispenser's tests and demos.
//
// Built on mongo-java-server (de.bwaldvogel, from Maven Central); started by
// scripts/server.sh, which downloads the jars and compiles this file:
//
//   javac --release 17 -cp 'scripts/.server/lib/*' -d scripts/.server/classes DispenserTestServer.java
//   java -cp 'scripts/.server/classes:scripts/.server/lib/*' DispenserTestServer \
//        [--port N] [--backend memory|h2] [--data FILE] [--port-file FILE]
//
// Listens on 127.0.0.1 only. Prints "listening 127.0.0.1:PORT" once ready.

import de.bwaldvogel.mongo.MongoBackend;
import de.bwaldvogel.mongo.MongoServer;
import de.bwaldvogel.mongo.MongoVersion;
import de.bwaldvogel.mongo.backend.h2.H2Backend;
import de.bwaldvogel.mongo.backend.memory.MemoryBackend;
import de.bwaldvogel.mongo.bson.Document;
import io.netty.channel.Channel;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;

public final class DispenserTestServer {

    static final String HOST = "127.0.0.1";
    static final String USAGE =
        "usage: DispenserTestServer [--port N] [--backend memory|h2] [--data FILE] [--port-file FILE]\n"
        + "  --port N          TCP port on 127.0.0.1 (0 = pick a free port; default 0)\n"
        + "  --backend NAME    memory (default) or h2 (persistent, needs --data)\n"
        + "  --data FILE       H2 MVStore file (h2 backend only)\n"
        + "  --port-file FILE  write the bound port there once listening (atomically)\n";

    /**
     * mongo-java-server 1.47 announces MongoDB 3.6 / maxWireVersion 8 by default;
     * the Rust mongodb 3.x driver requires wire version >= 9. Announce 6.0.0 / 17.
     */
    static final MongoVersion MONGO_6_0 = new MongoVersion() {
        @Override
        public List<Integer> getVersionArray() {
            return List.of(6, 0, 0);
        }

        @Override
        public int getWireVersion() {
            return 17;
        }
    };

    /**
     * mongo-java-server only knows the legacy "isMaster" command. Answer "hello"
     * (the modern name, used by drivers configured with a server API version) the
     * same way, with the "isWritablePrimary" field that newer clients expect.
     */
    static Document hello(Document isMasterReply) {
        if (isMasterReply != null && !isMasterReply.containsKey("isWritablePrimary")) {
            isMasterReply.put("isWritablePrimary", Boolean.TRUE);
        }
        return isMasterReply;
    }

    static final class Memory extends MemoryBackend {
        @Override
        public Document handleCommand(Channel channel, String db, String command, Document query) {
            if ("hello".equalsIgnoreCase(command)) {
                return hello(super.handleCommand(channel, db, "isMaster", query));
            }
            return super.handleCommand(channel, db, command, query);
        }
    }

    static final class H2 extends H2Backend {
        H2(String file) {
            super(file);
        }

        @Override
        public Document handleCommand(Channel channel, String db, String command, Document query) {
            if ("hello".equalsIgnoreCase(command)) {
                return hello(super.handleCommand(channel, db, "isMaster", query));
            }
            return super.handleCommand(channel, db, command, query);
        }
    }

    static final class BadArgs extends Exception {
        BadArgs(String message) {
            super(message);
        }
    }

    int port = 0;
    String backend = "memory";
    Path data;
    Path portFile;

    void parse(String[] args) throws BadArgs {
        for (int i = 0; i < args.length; i++) {
            String arg = args[i];
            String value = null;
            int eq = arg.indexOf('=');
            if (arg.startsWith("--") && eq > 0) {
                value = arg.substring(eq + 1);
                arg = arg.substring(0, eq);
            }
            switch (arg) {
                case "-h":
                case "--help":
                    System.out.print(USAGE);
                    System.exit(0);
                    break;
                case "--port":
                case "--backend":
                case "--data":
                case "--port-file":
                    if (value == null) {
                        if (i + 1 >= args.length) {
                            throw new BadArgs("option " + arg + " needs a value");
                        }
                        value = args[++i];
                    }
                    set(arg, value);
                    break;
                default:
                    throw new BadArgs("unknown argument: " + args[i]);
            }
        }
        if (backend.equals("h2") && data == null) {
            throw new BadArgs("--backend h2 needs --data FILE");
        }
        if (backend.equals("memory") && data != null) {
            throw new BadArgs("--data only applies to --backend h2");
        }
    }

    void set(String option, String value) throws BadArgs {
        switch (option) {
            case "--port":
                try {
                    port = Integer.parseInt(value);
                } catch (NumberFormatException e) {
                    port = -1;
                }
                if (port < 0 || port > 65535) {
                    throw new BadArgs("--port must be a number from 0 to 65535, got: " + value);
                }
                break;
            case "--backend":
                if (!value.equals("memory") && !value.equals("h2")) {
                    throw new BadArgs("--backend must be memory or h2, got: " + value);
                }
                backend = value;
                break;
            case "--data":
                if (value.isEmpty()) {
                    throw new BadArgs("--data needs a file name");
                }
                data = Path.of(value).toAbsolutePath();
                break;
            case "--port-file":
                if (value.isEmpty()) {
                    throw new BadArgs("--port-file needs a file name");
                }
                portFile = Path.of(value).toAbsolutePath();
                break;
            default:
                throw new BadArgs("unknown argument: " + option);
        }
    }

    static void writeAtomically(Path target, String content) throws IOException {
        Path dir = target.getParent();
        if (dir != null) {
            Files.createDirectories(dir);
        }
        Path tmp = target.resolveSibling(target.getFileName() + ".tmp." + ProcessHandle.current().pid());
        Files.writeString(tmp, content, StandardCharsets.UTF_8);
        try {
            Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        } catch (IOException e) {
            Files.deleteIfExists(tmp);
            throw e;
        }
    }

    public static void main(String[] args) throws Exception {
        DispenserTestServer options = new DispenserTestServer();
        try {
            options.parse(args);
        } catch (BadArgs e) {
            System.err.println("DispenserTestServer: " + e.getMessage());
            System.err.print(USAGE);
            System.exit(2);
        }

        // Quiet logging (slf4j-simple), unless overridden with -D...
        setDefault("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        setDefault("org.slf4j.simpleLogger.logFile", "System.err");
        setDefault("org.slf4j.simpleLogger.showDateTime", "true");
        setDefault("org.slf4j.simpleLogger.dateTimeFormat", "yyyy-MM-dd'T'HH:mm:ss.SSSZ");
        // MongoDatabaseHandler logs (under this logger name) every command that fails (duplicate key, ns not found, ...)
        // at ERROR with a stack trace, although the client gets a proper error reply.
        // Turn it back on with -Dorg.slf4j.simpleLogger.log.de.bwaldvogel.mongo.wire.MongoWireProtocolHandler=warn
        setDefault("org.slf4j.simpleLogger.log.de.bwaldvogel.mongo.wire.MongoWireProtocolHandler", "off");

        MongoBackend backend;
        if (options.backend.equals("h2")) {
            Path dir = options.data.getParent();
            if (dir != null) {
                Files.createDirectories(dir);
            }
            try {
                backend = new H2(options.data.toString());
            } catch (RuntimeException e) { // e.g. "The file is locked" (used by another server)
                System.err.println("DispenserTestServer: cannot open H2 data file " + options.data + ": " + e.getMessage());
                System.exit(1);
                return;
            }
        } else {
            backend = new Memory();
        }
        backend.version(MONGO_6_0);

        MongoServer server = new MongoServer(backend);
        try {
            server.bind(HOST, options.port);
        } catch (Exception e) { // netty rethrows java.net.BindException undeclared
            System.err.println("DispenserTestServer: cannot listen on " + HOST + ":" + options.port + ": " + e.getMessage());
            try {
                server.shutdownNow();
            } catch (RuntimeException ignored) {
                // the backend is closed by shutdownNow; nothing else to release
            }
            System.exit(1);
        }
        int port = server.getLocalAddress().getPort();

        CountDownLatch stopped = new CountDownLatch(1);
        AtomicBoolean shutDown = new AtomicBoolean(false);
        Path portFile = options.portFile;
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            if (!shutDown.compareAndSet(false, true)) {
                return;
            }
            try {
                // stops listening, closes connections, then closes the backend
                // (for h2: MVStore.close() commits and flushes the file)
                server.shutdown();
            } catch (Throwable t) {
                System.err.println("DispenserTestServer: error during shutdown: " + t);
                try {
                    backend.close();
                } catch (Throwable ignored) {
                    // best effort
                }
            }
            if (portFile != null) {
                try {
                    Files.deleteIfExists(portFile);
                } catch (IOException ignored) {
                    // best effort
                }
            }
            stopped.countDown();
        }, "dispenser-test-server-shutdown"));

        if (portFile != null) {
            writeAtomically(portFile, port + "\n");
        }
        System.out.println("listening " + HOST + ":" + port);
        System.out.flush();

        stopped.await();
    }

    static void setDefault(String key, String value) {
        if (System.getProperty(key) == null) {
            System.setProperty(key, value);
        }
    }
}
