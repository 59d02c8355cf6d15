// Package wordcount counts words in files, concurrently.
package main

import (
	"bufio"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
)

type counts map[string]int

var stopWords = map[string]bool{"the": true, "a": true, "and": true, "of": true}

const workers = 4

func countFile(path string) (counts, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	result := counts{}
	scanner := bufio.NewScanner(file)
	scanner.Split(bufio.ScanWords)
	for scanner.Scan() {
		word := strings.ToLower(strings.Trim(scanner.Text(), ".,;:!?\"'()"))
		if word == "" || stopWords[word] {
			continue
		}
		result[word]++
	}
	return result, scanner.Err()
}

func merge(into, from counts) {
	for word, n := range from {
		into[word] += n
	}
}

func main() {
	paths := make(chan string)
	var mu sync.Mutex
	var wg sync.WaitGroup
	total := counts{}
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for path := range paths {
				c, err := countFile(path)
				switch {
				case err != nil:
					fmt.Fprintln(os.Stderr, err)
				default:
					mu.Lock()
					merge(total, c)
					mu.Unlock()
				}
			}
		}()
	}
	for _, path := range os.Args[1:] {
		paths <- path
	}
	close(paths)
	wg.Wait()
	words := make([]string, 0, len(total))
	for word := range total {
		words = append(words, word)
	}
	sort.Slice(words, func(i, j int) bool { return total[words[i]] > total[words[j]] })
	for _, word := range words {
		fmt.Printf("%7d %s\n", total[word], word)
	}
}
