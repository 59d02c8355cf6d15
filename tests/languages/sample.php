<?php
declare(strict_types=1);

namespace App\Billing;

final class Invoice
{
    private array $lines = [];

    public function add(string $item, int $quantity, float $price): void
    {
        if ($quantity < 1) {
            throw new \InvalidArgumentException("quantity must be positive");
        }
        $this->lines[] = ['item' => $item, 'quantity' => $quantity, 'price' => $price];
    }

    public function total(): float
    {
        $sum = 0.0;
        foreach ($this->lines as $line) {
            $sum += $line['quantity'] * $line['price'];
        }
        return round($sum, 2);
    }
}

function vat_rate(string $country): float
{
    switch ($country) {
        case 'DE':
            return 0.19;
        case 'FR':
            return 0.20;
        default:
            return 0.0;
    }
}

function retry(callable $action, int $times): mixed
{
    $attempt = 0;
    do {
        try {
            return $action();
        } catch (\RuntimeException $e) {
            $attempt++;
        }
    } while ($attempt < $times);
    throw new \RuntimeException("gave up after $times attempts");
}

$invoice = new Invoice();
$invoice->add('pen', 3, 1.20);
$invoice->add('paper', 1, 4.99);
if ($invoice->total() > 5) {
    echo "total: " . $invoice->total() * (1 + vat_rate('DE')) . "\n";
}
while (false) {
    echo "never";
}
