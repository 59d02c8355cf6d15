module Main where

import qualified Data.Map.Strict as Map
import Data.List (sortBy)
import Data.Ord (comparing, Down (..))

data Token = Word String | Number Int
  deriving (Show, Eq)

newtype Counts = Counts (Map.Map String Int)

type Text = String

class Describe a where
  describe :: a -> String

instance Describe Token where
  describe (Word w) = "word " ++ w
  describe (Number n) = "number " ++ show n

tokenize :: Text -> [Token]
tokenize = map classify . words
  where
    classify w
      | all (`elem` "0123456789") w = Number (read w)
      | otherwise = Word w

count :: [Token] -> Counts
count tokens = Counts (Map.fromListWith (+) [(w, 1) | Word w <- tokens])

top :: Int -> Counts -> [(String, Int)]
top n (Counts m) = take n (sortBy (comparing (Down . snd)) (Map.toList m))

main :: IO ()
main = do
  let text = "the cat and the hat and 3 dogs"
      tokens = tokenize text
  mapM_ (putStrLn . describe) (take 3 tokens)
  case top 2 (count tokens) of
    [] -> putStrLn "no words"
    best -> print best
  let total = length tokens
   in print total
