package io.sofakafka.interop;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * Asks one broker for one topic's metadata (Metadata v1 on a plain socket): what that broker's own metadata
 * cache says. A cluster's brokers learn of a new topic one after another, and the clients ask whichever broker
 * they like, so a scenario that has just created a topic waits until every broker knows it, as Kafka's own
 * tests do (TestUtils.waitUntilMetadataIsPropagated), before it looks at it from the clients.
 */
final class MetadataProbe {
    private MetadataProbe() {
    }

    /** The leader of each partition of {@code topic} as {@code host:port} sees it; null if it does not know the topic. */
    static List<Integer> leaders(String host, int port, String topic) throws IOException {
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress(host, port), 10_000);
            s.setSoTimeout(10_000);
            DataOutputStream out = new DataOutputStream(s.getOutputStream());
            byte[] client = "interop-probe".getBytes(StandardCharsets.UTF_8);
            byte[] name = topic.getBytes(StandardCharsets.UTF_8);
            int size = 2 + 2 + 4 + 2 + client.length + 4 + 2 + name.length;
            out.writeInt(size);
            out.writeShort(3); // Metadata
            out.writeShort(1);
            out.writeInt(1); // correlation id
            out.writeShort(client.length);
            out.write(client);
            out.writeInt(1); // one topic
            out.writeShort(name.length);
            out.write(name);
            out.flush();
            DataInputStream in = new DataInputStream(s.getInputStream());
            in.readInt(); // size
            in.readInt(); // correlation id
            int brokers = in.readInt();
            for (int i = 0; i < brokers; i++) {
                in.readInt();
                skipString(in);
                in.readInt();
                skipString(in); // rack (nullable)
            }
            in.readInt(); // controller id
            int topics = in.readInt();
            List<Integer> leaders = null;
            for (int t = 0; t < topics; t++) {
                short error = in.readShort();
                skipString(in);
                in.readBoolean();
                int partitions = in.readInt();
                List<Integer> these = new ArrayList<>();
                for (int p = 0; p < partitions; p++) {
                    in.readShort();
                    int partition = in.readInt();
                    int leader = in.readInt();
                    skipInts(in);
                    skipInts(in);
                    while (these.size() <= partition) these.add(-1);
                    these.set(partition, leader);
                }
                if (error == 0) leaders = these;
            }
            return leaders;
        }
    }

    private static void skipString(DataInputStream in) throws IOException {
        short n = in.readShort();
        if (n > 0) in.readFully(new byte[n]);
    }

    private static void skipInts(DataInputStream in) throws IOException {
        int n = in.readInt();
        for (int i = 0; i < n; i++) in.readInt();
    }
}
