package org.example.inventory;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/** A small inventory with reservations. */
public class Sample {

    private final Map<String, Integer> stock = new HashMap<>();
    private final List<String> log = new ArrayList<>();

    static final int LOW_STOCK = 3;

    public void receive(String sku, int quantity) {
        if (quantity <= 0) {
            throw new IllegalArgumentException("quantity must be positive: " + quantity);
        }
        stock.merge(sku, quantity, Integer::sum);
        log.add("received " + quantity + " of " + sku);
    }

    public boolean reserve(String sku, int quantity) {
        int available = stock.getOrDefault(sku, 0);
        if (available < quantity) {
            log.add("refused " + quantity + " of " + sku);
            return false;
        }
        stock.put(sku, available - quantity);
        return true;
    }

    protected List<String> lowStock() {
        List<String> low = new ArrayList<>();
        for (Map.Entry<String, Integer> entry : stock.entrySet()) {
            if (entry.getValue() < LOW_STOCK) {
                low.add(entry.getKey());
            }
        }
        return low;
    }

    private static String describe(int level) {
        switch (level) {
            case 0:
                return "empty";
            case 1:
                return "almost empty";
            default:
                return "in stock";
        }
    }

    public static void main(String[] args) {
        Sample inventory = new Sample();
        inventory.receive("apple", 5);
        inventory.receive("pear", 1);
        int tries = 0;
        while (inventory.reserve("apple", 2)) {
            tries++;
        }
        System.out.println(tries + " reservations; low: " + inventory.lowStock());
        System.out.println(describe(inventory.stock.get("pear")));
    }
}
